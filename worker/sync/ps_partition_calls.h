// The calls of one PsClient::CallAll, one per partition, behind one interface:
// an async unary call per partition (Init, Pull, and PushPull without push
// streams), or a GRAD frame per partition on the shard's push stream
// (ps_stream.h), answered by a frame that names the partition's slice.
#ifndef GRADSYNC_WORKER_SYNC_PS_PARTITION_CALLS_H_
#define GRADSYNC_WORKER_SYNC_PS_PARTITION_CALLS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "worker/sync/ps_partitions.h"
#include "worker/sync/ps_stream.h"

namespace gradsync {

// How long past its deadline a unary call may take to report before it is
// cancelled (gRPC ends calls at their deadline; this only bounds our wait).
inline constexpr absl::Duration kPsCallGrace = absl::Seconds(5);

// The calls of one CallAll, one per partition: started one by one, each
// finishing once with a status and (when OK) the answer frame; the caller
// takes finished calls as they come.
class PsPartitionCalls {
 public:
  explicit PsPartitionCalls(size_t n) : resp_(n), status_(n) {}
  virtual ~PsPartitionCalls() = default;

  // Starts call i: partition's `request`, due by `deadline`.
  virtual void Start(size_t i, const PsPartitionRef& partition, grpc::ByteBuffer request,
                     absl::Time deadline) = 0;
  // Ends every call still running, promptly; each then reports `why` or
  // its own end (thread-safe).
  virtual void CancelAll(const absl::Status& why) = 0;
  // How long past the deadline a call may take to report by itself before
  // the caller cancels it.
  virtual absl::Duration grace() const = 0;

  // Call i's outcome, its message naming the shard (and partition, if known).
  const absl::Status& status(size_t i) const { return status_[i]; }
  const grpc::ByteBuffer& response(size_t i) const { return resp_[i]; }

  // Waits until a call finished or `wake` on `env`'s clock; moves the
  // finished ones (maybe none) into `batch`. False when it woke at `wake`
  // with none.
  bool Take(absl::Time wake, std::vector<size_t>* batch,
            const Env* env = Env::Default()) {
    absl::MutexLock l(&mu_);
    auto any = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !finished_.empty(); };
    const bool woke = env->AwaitWithDeadline(&mu_, absl::Condition(&any), wake);
    batch->swap(finished_);
    finished_.clear();
    return woke;
  }

 protected:
  // Records call i's end (once per call; never blocks).
  void Finish(size_t i, absl::Status status, grpc::ByteBuffer response) {
    status_[i] = std::move(status);
    resp_[i] = std::move(response);
    absl::MutexLock l(&mu_);
    finished_.push_back(i);
  }

 private:
  std::vector<grpc::ByteBuffer> resp_;
  std::vector<absl::Status> status_;
  absl::Mutex mu_;
  std::vector<size_t> finished_ ABSL_GUARDED_BY(mu_);
};

// One async unary call of `method` per partition, with `creds` (and the cluster
// token: PsClient's channels add none) on each; gRPC ends each at its
// deadline; grace() is kPsCallGrace. `creds` and the stubs must outlive the
// calls.
std::unique_ptr<PsPartitionCalls> MakeUnaryCalls(
    size_t n, std::string method, const PsCredentials* creds,
    std::function<grpc::GenericStub*(const std::string&)> stub_for);

// PushPull over push streams, one per shard (`stream_for` opens or reuses
// it): a partition's call is its GRAD frame written on its shard's stream,
// answered when that stream brings back a frame naming the partition's slice. A
// stream that ends fails every partition still waiting on it. No deadline
// travels with a frame: the caller cancels at the deadline (grace() is
// zero).
using PsStreamFor = std::function<absl::StatusOr<std::shared_ptr<PsPushStream>>(
    const std::string& address)>;
std::unique_ptr<PsPartitionCalls> MakeStreamCalls(size_t n, PsStreamFor stream_for);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SYNC_PS_PARTITION_CALLS_H_
