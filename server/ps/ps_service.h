// gRPC face of a PsStore: raw-ByteBuffer callback methods so that tensor data
// is reduced straight out of the received slices and replies are sent from a
// shared parameter snapshot without copies. A PushPull that must wait for the
// other ranks (sync) or for the slowest rank (SSP) holds its reactor, not a
// thread.
//
// PushPull, step by step:
//  1. on the gRPC callback thread: parse the frame (references to the
//     received slices, no copy); a push of at most inline_bytes float32
//     bytes goes straight to step 2 there when PsStore::TryPush can (the
//     slice is free and writes no checkpoints), any other to the shard's
//     ReducePool;
//  2. on that thread or a pool thread: PsStore::Push reduces the slices
//     straight into the partition's sum under the partition's lock; the
//     N-th push of a sync step runs the optimizer there too;
//  3. whichever thread completes a reply finishes its reactor with a frame
//     over the shared parameter snapshot (zero-copy); a reaction that
//     completed a step's answers spreads them over the pool
//     (SpreadAnswers, ps_stream.h).
// Every call is first checked by PsAccess (ps_access.h): the caller must
// prove membership of the call's job (PERMISSION_DENIED otherwise, before
// anything is parsed further or stored). A Pull that waits (for Init, or at
// the async final-pull barrier) is bounded in number and time and ends when
// its call is cancelled or passes its deadline (PsStore::Pull).
// PushPullStream (ps_stream.h) does steps 1-3 per frame of one stream.
// Init, Pull, EndJob and Checkpoints run on the callback thread: none
// reduces or steps; an Init that resumes (reads a checkpoint file) runs on
// the pool. Checkpoint writes happen in step 2 (PsSlice).
#ifndef GRADSYNC_SERVER_PS_PS_SERVICE_H_
#define GRADSYNC_SERVER_PS_PS_SERVICE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/grpc/refusal_log.h"
#include "gradsync/v1/gradsync.grpc.pb.h"
#include "server/ps/ps_access.h"
#include "server/ps/ps_store.h"
#include "server/ps/ps_stream.h"
#include "server/ps/ps_traffic.h"
#include "server/ps/reduce_pool.h"

namespace gradsync {

using PsServiceBase = v1::ParameterServer::WithRawCallbackMethod_Init<
    v1::ParameterServer::WithRawCallbackMethod_Pull<
        v1::ParameterServer::WithRawCallbackMethod_PushPull<
            v1::ParameterServer::WithRawCallbackMethod_PushPullStream<
                v1::ParameterServer::WithCallbackMethod_EndJob<
                    v1::ParameterServer::WithCallbackMethod_Checkpoints<
                        v1::ParameterServer::WithRawCallbackMethod_SaveCheckpoint<
                            v1::ParameterServer::WithRawCallbackMethod_LoadCheckpoint<
                                v1::ParameterServer::Service>>>>>>>>;

// Threads that reduce and step (a shard's CPU work is memory-bound: a few
// are enough to overlap partitions; more only contend for cores). They also
// send a step's answers beyond the few sent where the step completed
// (SpreadAnswers), so a many-core shard serving many workers may want more:
// the server's --ps_reduce_threads, 1..kMaxPsReduceThreads.
inline constexpr int kPsReduceThreads = 2;
inline constexpr int kMaxPsReduceThreads = 64;

// OK for 1..kMaxPsReduceThreads; else INVALID_ARGUMENT naming the flag.
absl::Status CheckPsReduceThreads(int64_t threads);

// Pushes (PushPull, PushPullStream) of at most this many float32 bytes are
// reduced on the gRPC reaction that read them, when the slice is free and
// keeps no checkpoints (PsStore::TryPush), rather than handed to the reduce
// threads: for a small push the hand-off (a thread wake-up, 25-35 us on 2
// cores) costs more than the sum, and a step of a 16 Ki-float slice is a
// few microseconds. The server's --ps_inline_bytes.
inline constexpr size_t kPsInlineBytes = 64 << 10;

// Thread-safe. `store` and `access` must outlive the service. Destruction runs the
// reductions still queued (their replies then finish) and joins the pool.
// `traffic` counts requests and bytes for /metrics (default: nothing).
class PsService final : public PsServiceBase {
 public:
  PsService(PsStore* store, const PsAccess* access, int reduce_threads = kPsReduceThreads,
            PsTraffic traffic = {}, size_t inline_bytes = kPsInlineBytes)
      : store_(store),
        access_(access),
        pool_(reduce_threads),
        traffic_(traffic),
        inline_bytes_(inline_bytes) {}

  int reduce_threads() const { return pool_.threads(); }

  grpc::ServerUnaryReactor* Init(grpc::CallbackServerContext* ctx,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* ctx,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* PushPull(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  // PushPull over one stream per (job, rank, shard) (server/ps/ps_stream.h):
  // the same reductions, without a call per partition.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* PushPullStream(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* EndJob(grpc::CallbackServerContext* ctx,
                                   const v1::EndJobRequest* request,
                                   v1::EndJobResponse* response) override;
  grpc::ServerUnaryReactor* Checkpoints(grpc::CallbackServerContext* ctx,
                                        const v1::CheckpointsRequest* request,
                                        v1::CheckpointsResponse* response) override;
  // Allreduce checkpoints (server/ps/allreduce_checkpoints.h); both read or write a
  // file, so they run on the pool. A CKPT frame's data is the piece's
  // parameters followed by header.moments optimizer moments of equal length.
  grpc::ServerUnaryReactor* SaveCheckpoint(grpc::CallbackServerContext* ctx,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* LoadCheckpoint(grpc::CallbackServerContext* ctx,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;

 private:
  // Finishes `reactor` with `access` and logs it with the caller's address
  // (rate-limited, refusals_) when it is an error; false when it is OK.
  bool Refused(grpc::CallbackServerContext* ctx, grpc::ServerUnaryReactor* reactor,
               const char* method, const absl::Status& access);
  // The ring-checkpoint calls (ps_service_ckpt.cc): parse the CKPT frame,
  // check the caller with access(metadata, frame's job), run `work` on the
  // pool.
  template <typename Access, typename Work>
  grpc::ServerUnaryReactor* OnPool(grpc::CallbackServerContext* ctx, const char* method,
                                   const grpc::ByteBuffer& request,
                                   grpc::ByteBuffer* response, Access access, Work work);

  // What SumPush and the PushPullStream reactors use.
  PsStreamDeps PushDeps() {
    return PsStreamDeps{store_,     access_,      &pool_, &traffic_.push_pull,
                        &refusals_, inline_bytes_};
  }

  PsStore* const store_;
  const PsAccess* const access_;
  ReducePool pool_;
  const PsTraffic traffic_;
  const size_t inline_bytes_;
  RefusalLog refusals_;
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_PS_PS_SERVICE_H_
