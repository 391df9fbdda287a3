// Client of a job's parameter-server shards: pushes gradient slices and pulls
// parameter slices, all shards in parallel, tensor data zero-copy both ways.
#ifndef GRADSYNC_WORKER_PS_CLIENT_H_
#define GRADSYNC_WORKER_PS_CLIENT_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

// Calls may come from one thread at a time; Abort from any thread.
class PsClient {
 public:
  PsClient(std::string job_id, int rank,
           const std::vector<v1::PsShardInfo>& shards);

  // Installs params[offset..offset+count) on each shard (rank 0, once).
  absl::Status Init(const float* params, const v1::ShardConfig& config,
                    absl::Time deadline);
  // params[...] = every shard's current slice, or its initial one when
  // `initial` (waits for Init).
  absl::Status Pull(float* params, bool initial, absl::Time deadline);
  // Pushes grad's slices for `step`; writes the answered parameters.
  absl::Status PushPull(int64_t step, const float* grad, float* params,
                        absl::Time deadline);
  // Cancels calls in flight; later calls fail with `status`.
  void Abort(const absl::Status& status);

 private:
  struct Shard {
    v1::PsShardInfo info;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<grpc::GenericStub> stub;
  };
  // Runs one call per shard in parallel: request(s) builds the frame for
  // shard s; on success the reply's data is copied to out + offset (if out).
  absl::Status CallAll(const std::string& method,
                       const std::function<grpc::ByteBuffer(const Shard&)>& request,
                       float* out, absl::Time deadline);

  const std::string job_id_;
  const int rank_;
  std::vector<Shard> shards_;

  absl::Mutex mu_;
  std::set<grpc::ClientContext*> active_ ABSL_GUARDED_BY(mu_);
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_PS_CLIENT_H_
