// Client of a job's parameter-server shards: pushes gradient slices and pulls
// parameter slices, all shards in parallel, tensor data zero-copy both ways.
#ifndef GRADSYNC_WORKER_SYNC_PS_CLIENT_H_
#define GRADSYNC_WORKER_SYNC_PS_CLIENT_H_

#include <map>
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

// One independently synchronised slice of the flat vector on one shard.
struct PsPiece {
  std::string key;      // PS slice key: "JOB/b<bucket>s<shard>"
  std::string address;  // shard
  uint64_t offset = 0;
  uint64_t count = 0;
};

// Cuts every bucket at the shard boundaries: piece = bucket ∩ shard (empty
// intersections dropped). `pieces_of_bucket[b]` lists bucket b's pieces.
std::vector<PsPiece> MakePsPieces(const std::string& job_id,
                                  const std::vector<v1::PsShardInfo>& shards,
                                  const std::vector<std::pair<uint64_t, uint64_t>>& buckets,
                                  std::vector<std::vector<int>>* pieces_of_bucket);

// Calls may come from one thread at a time; Abort from any thread.
class PsClient {
 public:
  PsClient(int rank, std::vector<PsPiece> pieces);

  // Installs params[offset..offset+count) of every piece (rank 0, once).
  absl::Status Init(const float* params, const v1::ShardConfig& config,
                    absl::Time deadline);
  // params[...] = every piece's current values, or its initial ones when
  // `initial` (waits for Init).
  absl::Status Pull(float* params, bool initial, absl::Time deadline);
  // Pushes grad's slices of `pieces` for `step`, in parallel; writes the
  // answered parameters into params.
  absl::Status PushPull(int64_t step, const float* grad, float* params,
                        const std::vector<int>& pieces, absl::Time deadline);
  // Cancels calls in flight; later calls fail with `status`.
  void Abort(const absl::Status& status);

 private:
  // Runs one call per listed piece in parallel: request(p) builds the frame
  // for piece p; on success the reply's data is copied to out + offset (if
  // out).
  absl::Status CallAll(const std::string& method, const std::vector<int>& which,
                       const std::function<grpc::ByteBuffer(const PsPiece&)>& request,
                       float* out, absl::Time deadline);

  const int rank_;
  std::vector<PsPiece> pieces_;
  std::vector<int> all_;
  std::map<std::string, std::unique_ptr<grpc::GenericStub>> stubs_;  // by address

  absl::Mutex mu_;
  std::set<grpc::ClientContext*> active_ ABSL_GUARDED_BY(mu_);
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SYNC_PS_CLIENT_H_
