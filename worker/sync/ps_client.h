// Client of a job's parameter-server shards: pushes gradient slices and pulls
// parameter slices, many partitions in flight at once (pulls: all; pushes: a
// window, see set_push_window), tensor data zero-copy both ways: requests
// carry a slice over the caller's gradient memory, replies are copied
// straight out of the received slices into the caller's parameters, each as
// soon as it arrives. Init and Pull are one async unary call per partition;
// PushPull writes each partition on a stream per shard that stays open for the
// job (ps_stream.h), or, with PsPushStreams() off, a unary call per partition.
#ifndef GRADSYNC_WORKER_SYNC_PS_CLIENT_H_
#define GRADSYNC_WORKER_SYNC_PS_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/ps_layout.h"
#include "common/wire_dtype.h"
#include "gradsync/v1/gradsync.pb.h"
#include "worker/sync/ps_partitions.h"
#include "worker/sync/ps_stream.h"
#include "worker/sync/stall_watch.h"

namespace gradsync {

class PsPartitionCalls;  // ps_partition_calls.h

// The configuration rank 0 installs on every PS slice of `job` (Init):
// world size, mode, SSP bound (-1 = unbounded), optimizer, checkpoints, and
// with job.resume_from set, the old job's step `resume_step` to load.
v1::ShardConfig ShardConfigOf(const JobOptions& job, int64_t resume_step);

// Calls may come from one thread at a time; Abort from any thread.
class PsClient {
 public:
  // PushPull sends gradients and asks for parameters in `wire` (Init and
  // Pull always move float32: the starting and final parameters are exact).
  // `stall` (may be null; must outlive this) hears of calls that wait past
  // its threshold, naming the shards still outstanding.
  // PushPull uses the push streams when PsPushStreams() (grpc_util.h) is
  // on at construction. `env` (not owned, outlives this) is the clock of
  // the calls' waits; its deadlines also go to gRPC, so it keeps real time.
  PsClient(int rank, PsCredentials creds, std::vector<PsPartitionRef> partitions,
           WireDtype wire = WireDtype::kFp32, const StallWatch* stall = nullptr,
           const Env* env = Env::Default());
  // Half-closes the push streams (cancels those not ended within
  // kStreamCloseWait).
  ~PsClient();
  PsClient(const PsClient&) = delete;
  PsClient& operator=(const PsClient&) = delete;
  static constexpr absl::Duration kStreamCloseWait = absl::Seconds(1);

  // Installs params[offset..offset+count) of every partition (rank 0, once).
  absl::Status Init(const float* params, const v1::ShardConfig& config,
                    absl::Time deadline);
  // params[...] = every partition's current values, or its initial ones when
  // `initial` (waits for Init).
  absl::Status Pull(float* params, bool initial, absl::Time deadline);
  // Async jobs' last call: params[...] = every partition's values once every
  // rank of the job has made its final pull (so all ranks end equal).
  absl::Status FinalPull(float* params, absl::Time deadline);
  // Pushes grad's slices of `partitions` for `step`, a window of them in flight
  // at once (set_push_window); writes each answered partition's parameters into params as it arrives.
  // With a float32 wire, grad[partition] is sent without a copy: it must not
  // change until this returns (it is not read after); a 16-bit wire
  // converts it into the request.
  // `bucket` only names the wait in stall reports.
  absl::Status PushPull(int64_t step, const float* grad, float* params,
                        const std::vector<int>& partitions, absl::Time deadline,
                        int bucket = -1);
  // PushPull keeps at most `window` calls in flight (0: all at once), taken
  // in StaggeredOrder; a window below the number of shards is raised to it,
  // since with fewer every rank could hold calls that wait for partitions
  // another rank has not sent yet. The constructor sets DefaultPushWindow.
  void set_push_window(size_t window);
  size_t push_window() const { return push_window_; }
  // 2 * shards + 2, or the environment's GRADSYNC_PS_PUSH_WINDOW (0: all at
  // once). On emulated 1 Gbit hosts with S = N = 4 shards and 1 MiB
  // partitions, all at once left the links idle at the end of each step
  // (every partition completes last, then every answer is sent); a window
  // of 10 sends answers while later partitions are still being pushed.
  static size_t DefaultPushWindow(size_t shards);
  static constexpr char kPushWindowEnv[] = "GRADSYNC_PS_PUSH_WINDOW";

  // Cancels calls in flight; later calls fail with `status`.
  void Abort(const absl::Status& status);

  // Push streams opened so far (tests check that steps reuse them).
  int64_t streams_opened() const;

  // The largest step any PushPull answer carried so far (async: the pushes
  // the slice had applied when it answered; sync: the steps it had applied).
  int64_t newest_push_reply_step() const { return newest_push_reply_step_.load(); }

 private:
  // Names a CallAll in stall reports.
  struct WaitTag {
    int64_t step = 0;
    int bucket = -1;
    const char* phase = "";
  };
  // Runs one call per listed partition, in the listed order, at most `window`
  // in flight (0: all at once), each with `deadline`, as unary calls of
  // `method` or (`stream`) frames on the push streams:
  //  1. request(p) builds partition p's frame and the call starts: the first
  //     `window` at once, then one for each call that finishes (none once
  //     the calls are cancelled);
  //  2. gRPC's callback only queues the finished call (never blocks);
  //  3. this thread takes finished calls as they come and copies each reply's
  //     data to out + offset (if out); the first error cancels the rest;
  //  4. returns when every call has finished (unary calls by deadline + a
  //     grace period, stream frames by the deadline: then the stragglers
  //     are cancelled), with the first error.
  // Step 3 waits at most until the stall threshold at first: a wait past it
  // is reported once (tag and the partitions not answered yet), then goes on.
  absl::Status CallAll(
      const std::string& method, const std::vector<int>& which,
      const std::function<grpc::ByteBuffer(const PsPartitionRef&)>& request, float* out,
      absl::Time deadline, const WaitTag& tag, size_t window = 0, bool stream = false);
  // The n calls of one CallAll: unary calls of `method`, or (`stream`)
  // frames on the push streams.
  std::unique_ptr<PsPartitionCalls> MakeCalls(const std::string& method, size_t n,
                                              bool stream);
  // `address`'s push stream: the open one, or a new one when it ended.
  absl::StatusOr<std::shared_ptr<PsPushStream>> StreamFor(const std::string& address);
  // `partitions` in the order this rank pushes them: each run of S consecutive
  // partitions (S shards, assigned round-robin) rotated by rank, so that at any
  // moment the ranks push to different shards. Every rank's runs hold the
  // same partitions, which with a window of at least S keeps a step from
  // deadlocking: a rank that has not sent all of the earliest incomplete
  // run holds fewer than S calls and can start another.
  std::vector<int> StaggeredOrder(const std::vector<int>& partitions) const;
  // A stall report of the calls of `which` started (the first `launched`)
  // and not `answered` yet, and how many are not started.
  StallReport DescribeStall(const WaitTag& tag, const std::vector<int>& which,
                            const std::vector<bool>& answered, size_t launched) const;
  // Step 3 for one finished call.
  // `*step` = the answer's step (0 without parameters).
  absl::Status TakeReply(const PsPartitionRef& partition, const absl::Status& status,
                         const grpc::ByteBuffer& response, float* out,
                         int64_t* step) const;

  // A PULL frame's call for every partition at `step` (kPullInitialStep, ...).
  absl::Status PullAt(int64_t step, float* params, absl::Time deadline);

  const int rank_;
  const PsCredentials creds_;
  const WireDtype wire_;
  const StallWatch* const stall_;
  const Env* const env_;
  std::vector<PsPartitionRef> partitions_;
  std::vector<int> all_;
  std::atomic<int64_t> newest_push_reply_step_{0};
  size_t push_window_ = 0;  // PushPull calls in flight at most (0: all)
  const bool push_stream_;  // PushPull over the push streams
  std::map<std::string, std::unique_ptr<grpc::GenericStub>> stubs_;  // by address

  mutable absl::Mutex mu_;
  std::set<PsPartitionCalls*> active_ ABSL_GUARDED_BY(mu_);  // CallAlls running
  // By shard address; opened by the first PushPull to each shard.
  std::map<std::string, std::shared_ptr<PsPushStream>> streams_ ABSL_GUARDED_BY(mu_);
  // Streams replaced in streams_ after they ended whose calls may not be
  // done yet: the destructor waits for them too, so that no call (which
  // holds its channel, and with it gRPC's callback threads) outlives the
  // client. Done ones are dropped when the next stream opens.
  std::vector<std::shared_ptr<PsPushStream>> retired_ ABSL_GUARDED_BY(mu_);
  int64_t streams_opened_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SYNC_PS_CLIENT_H_
