// server/ps: a parameter-server shard — its state (this file) and the gRPC
// service in front of it (ps_service.h).
//
// Parameter-server shard state: one slice of each job's flat parameter
// vector, its optimizer, and the sync (BSP) / async (ASGD, SSP) rules.
//
// No gRPC in here: replies are delivered through `Reply` callbacks so that the
// service can hold an RPC open without holding a thread, and tests can drive
// the store directly.
//
// State is keyed by a "slice key": the job id, or "JOB/PIECE" when a job
// splits its vector into independently synchronised pieces (gradient buckets
// x shards). Every optimizer here is elementwise, so pieces updated
// separately give the same result as one vector. EndJob(JOB) drops them all.
//
// Thread-safe: every public method may be called concurrently. Reply
// callbacks run on the calling thread of whichever method completes them,
// after the store's lock has been released, exactly once each.
#ifndef GRADSYNC_SERVER_PS_PS_STORE_H_
#define GRADSYNC_SERVER_PS_PS_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/optimizer.h"

namespace gradsync {

struct ShardJobConfig {
  int world_size = 1;
  bool async = false;
  int staleness = -1;  // async: SSP bound; < 0 = unbounded
  OptimizerOptions optimizer;
};

// Parameters handed out: an immutable snapshot, shared with in-flight sends.
using ParamSnapshot = std::shared_ptr<const std::vector<float>>;

struct PsReply {
  ParamSnapshot params;
  int64_t step = 0;  // steps applied so far (sync) / pushes applied (async)
};

using Reply = std::function<void(absl::StatusOr<PsReply>)>;

class PsStore {
 public:
  PsStore() = default;
  PsStore(const PsStore&) = delete;
  PsStore& operator=(const PsStore&) = delete;

  // Installs job `job_id`'s slice with its initial values. ALREADY_EXISTS if
  // the job is installed, INVALID_ARGUMENT on a bad config, FAILED_PRECONDITION
  // if the job was ended. Wakes pending Pulls.
  absl::Status Init(const std::string& job_id, const ShardJobConfig& config,
                    std::vector<float> initial);

  // Replies with the current parameters, or with the initial ones when
  // `initial` (so that every rank starts from the same values even if an async
  // peer has already pushed). Waits for Init when the job is not installed
  // yet; EndJob or Shutdown ends the wait.
  void Pull(const std::string& job_id, bool initial, Reply reply);

  // Push of `rank`'s gradient for `step`; `accumulate(dst)` must add the
  // `count` received floats into dst. Rules:
  //  1. Unknown job -> FAILED_PRECONDITION; count != slice size ->
  //     INVALID_ARGUMENT; rank out of range -> INVALID_ARGUMENT.
  //  2. sync: step must be the step being reduced and the rank must not have
  //     pushed it yet, else FAILED_PRECONDITION (nothing is summed). The N-th
  //     push averages the sum, applies the optimizer once, and replies to all
  //     N pushes with the new parameters.
  //  3. async: step must equal the rank's count of earlier pushes, else
  //     FAILED_PRECONDITION. The gradient is applied at once with learning
  //     rate lr/N (a push moves 1/N of a sync step); the reply is
  //     held while the rank would be more than `staleness` steps ahead of the
  //     slowest rank (SSP), then carries the newest parameters.
  void Push(const std::string& job_id, int64_t step, int rank, size_t count,
            absl::FunctionRef<void(float*)> accumulate, Reply reply);

  // Drops the job; pending replies get ABORTED with `reason`. Later calls for
  // the job get FAILED_PRECONDITION. OK if the job is unknown.
  void EndJob(const std::string& job_id, const std::string& reason);

  // Ends every job (server shutdown): pending replies get UNAVAILABLE.
  void Shutdown();

  // For tests and metrics.
  size_t NumJobs() const;

 private:
  struct Job {
    ShardJobConfig config;
    std::unique_ptr<Optimizer> optimizer;
    std::vector<float> params;
    std::vector<float> scratch;      // sync: sum of pushes; async: one push
    int64_t version = 0;             // bumped on every update
    ParamSnapshot snapshot;          // params at `snapshot_version`
    int64_t snapshot_version = -1;
    // sync
    int64_t step = 0;
    int pushes = 0;
    std::vector<bool> pushed;
    std::vector<Reply> waiting;
    ParamSnapshot initial;
    // async
    std::vector<int64_t> clock;
    struct Held {
      int rank;
      Reply reply;
    };
    std::vector<Held> held;
  };
  struct Completion {
    Reply reply;
    absl::StatusOr<PsReply> result;
  };

  static ParamSnapshot Snapshot(Job* job);
  static void Run(std::vector<Completion>* done);
  // async: moves held replies that may proceed into `done`.
  static void ReleaseHeld(Job* job, std::vector<Completion>* done);

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<Reply>> pull_waiters_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> ended_ ABSL_GUARDED_BY(mu_);  // id->reason
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_PS_PS_STORE_H_
