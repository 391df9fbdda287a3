// Allreduce-job checkpoints, worker side. Ring replicas are bit-identical, so
// rank 0 alone saves the model's parameters and optimizer state every K
// steps; they go to PS shard 0 (its --state_dir/checkpoints/JOB, written by
// server/ps/allreduce_checkpoints.h), where a resumed job finds them whichever
// worker becomes its rank 0.
//
// Wire: a checkpoint of n parameters is cut into pieces of
// kAllreduceCheckpointPieceFloats (AllreduceCheckpointPieces); piece i travels as one
// CKPT TensorFrame (SaveCheckpoint / LoadCheckpoint) whose data is the
// piece's parameters followed by its optimizer moments (0, 1 or 2 arrays of
// the same length), with the optimizer's step count in the header.
#ifndef GRADSYNC_WORKER_SYNC_ALLREDUCE_CHECKPOINT_H_
#define GRADSYNC_WORKER_SYNC_ALLREDUCE_CHECKPOINT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/optimizer.h"
#include "common/partition.h"
#include "worker/sync/ps_client.h"

namespace gradsync {

// 4 MB of parameters (12 MB with Adam's moments) per frame.
inline constexpr size_t kAllreduceCheckpointPieceFloats = size_t{1} << 20;

// [i*P, min(n, (i+1)*P)) for P = kAllreduceCheckpointPieceFloats; one piece (of
// size 0) when n == 0.
std::vector<Range> AllreduceCheckpointPieces(size_t n);

// What an allreduce checkpoint holds: the parameters, and the optimizer state laid
// out as them (OptimizerState).
struct AllreduceState {
  std::vector<float> params;
  OptimizerState optimizer;
};

// The checkpoints of allreduce jobs on one PS shard. Every call has a deadline.
// Thread-compatible; Cancel may be called from any thread and ends the call
// in progress (and later ones) with CANCELLED.
class AllreduceCheckpointClient {
 public:
  // Every call carries `creds` (the job's secret; a resuming job's also the
  // secret of the job it resumes), as the shard requires (ps_access.h).
  AllreduceCheckpointClient(const std::string& address, PsCredentials creds);

  // Sends `state` as `job`'s checkpoint at `step`, piece by piece (each
  // piece is durable on the shard when its call returns). The shard's error
  // (its address in the message) otherwise.
  absl::Status Save(const std::string& job, int64_t step, const AllreduceState& state,
                    absl::Time deadline);

  // The newest step at which every piece of `job` has a checkpoint on the
  // shard; NOT_FOUND naming the job when there is none.
  absl::StatusOr<int64_t> NewestStep(const std::string& job, absl::Time deadline);

  // Loads `job`'s checkpoint at `step` into `state`, whose params are sized
  // to the model (n floats). NOT_FOUND / DATA_LOSS naming the file as the
  // shard reports; FAILED_PRECONDITION when a piece does not fit the model.
  absl::Status Load(const std::string& job, int64_t step, AllreduceState* state,
                    absl::Time deadline);

  void Cancel();

 private:
  // One unary call of `method` with a CKPT frame; the reply frame.
  absl::StatusOr<grpc::ByteBuffer> Call(const std::string& method,
                                        const grpc::ByteBuffer& request,
                                        absl::Time deadline);
  absl::Status LoadPiece(const std::string& job, int64_t step, int index, Range r,
                         AllreduceState* state, absl::Time deadline);

  const std::string address_;
  const PsCredentials creds_;
  const std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;

  absl::Mutex mu_;
  grpc::ClientContext* active_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// A job's checkpoints as the training loop takes them (rank 0 saves; every
// rank of a resumed job loads). Saving copies the state into host memory on
// the training thread (Buffer, then Start) and sends it on a thread of its
// own; at most one checkpoint is in flight: Buffer waits for the previous
// one.
//
// Threading: everything but Abort on the training thread; Abort from any.
class AllreduceCheckpointer {
 public:
  // `every` = spec.checkpoint_every (0: never saves); `save` = this rank
  // saves (rank 0); `timeout` bounds each checkpoint's transfer, on
  // `env`'s clock (not owned, outlives this).
  AllreduceCheckpointer(std::unique_ptr<AllreduceCheckpointClient> client,
                        std::string job, int64_t every, bool save, absl::Duration timeout,
                        const Env* env = Env::Default());
  ~AllreduceCheckpointer();  // waits for the transfer in flight (bounded)

  // Resuming: loads the newest complete checkpoint of `old_job` into
  // restored() (params sized n) and returns its step.
  absl::StatusOr<int64_t> Restore(const std::string& old_job, size_t n);
  // The state Restore loaded; null before.
  const AllreduceState* restored() const { return restored_.get(); }

  // Whether a checkpoint is due once `steps` steps have been applied.
  bool Due(int64_t steps) const {
    return save_ && every_ > 0 && steps > 0 && steps % every_ == 0;
  }
  // This rank saves checkpoints (rank 0 of a job that checkpoints).
  bool saves() const { return save_ && every_ > 0; }
  // The buffer to copy the next checkpoint into, once the previous one is
  // sent; that one's error if it failed.
  absl::StatusOr<AllreduceState*> Buffer();
  // Sends Buffer()'s contents as the checkpoint at `step`.
  void Start(int64_t step);
  // Waits for the checkpoint in flight; its status.
  absl::Status Wait();
  // Fails the transfer in flight and later ones with `why`.
  void Abort(const absl::Status& why);

 private:
  void Send(int64_t step);

  // Constant after construction.
  const std::unique_ptr<AllreduceCheckpointClient> client_;
  const std::string job_;
  const int64_t every_;
  const bool save_;
  const absl::Duration timeout_;
  const Env* const env_;
  std::unique_ptr<AllreduceState> restored_;  // training thread only

  // Written by the training thread while no sender runs (Buffer joins it),
  // read by the sender.
  AllreduceState buffer_;
  std::thread sender_;  // the transfer in flight; training thread only

  absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);  // first failure
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SYNC_ALLREDUCE_CHECKPOINT_H_
