// The server side of ParameterServer.PushPullStream: PushPull over one
// long-lived stream per (job, rank, shard) instead of one unary call per
// partition. A unary call costs a new HTTP/2 stream, headers and trailers
// both ways, the caller's credentials checked again, and a call object on
// each side; on the stream a push is one DATA frame and so is its answer.
//
// Frame by frame:
//  1. a read on the gRPC callback thread: parse the frame (references to the
//     received slices, no copy); check the caller with PsAccess against the
//     stream's metadata (once per (job, rank), then remembered); a GRAD
//     frame only;
//  2. SumPush, exactly as a unary PushPull (summed here when small and
//     PsStore::TryPush can, else on the shard's ReducePool); start the next
//     read. The client keeps a bounded window of pushes unanswered
//     (PsClient::set_push_window), which bounds what a stream holds here;
//  3. the reply (a PARAMS frame over the shared parameter snapshot, naming
//     the slice and the step) joins the stream's write queue, one write in
//     flight, from whichever thread completed it or sends it
//     (SpreadAnswers).
// The first error (a refused, malformed or failed push) ends the stream
// with its status, the slice named in the message; replies already queued
// are dropped. A cancelled stream (client gone, or its deadline) drops the
// replies still to come: the reply callbacks reach the reactor only
// through a gate that its OnDone closes.
#ifndef GRADSYNC_SERVER_PS_PS_STREAM_H_
#define GRADSYNC_SERVER_PS_PS_STREAM_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_callback.h>

#include "common/grpc/refusal_log.h"
#include "common/grpc/tensor_frame.h"
#include "server/ps/ps_access.h"
#include "server/ps/ps_store.h"
#include "server/ps/ps_traffic.h"
#include "server/ps/reduce_pool.h"

namespace gradsync {

// What a PushPullStream reactor uses; all must outlive the server's calls.
struct PsStreamDeps {
  PsStore* store = nullptr;
  const PsAccess* access = nullptr;
  ReducePool* pool = nullptr;
  const PsMethodTraffic* traffic = nullptr;
  RefusalLog* refusals = nullptr;
  // Pushes of at most this many float32 bytes are reduced on the reaction
  // that read them when PsStore::TryPush can (else on `pool`); 0: never.
  // Their answers: SpreadAnswers.
  size_t inline_bytes = 0;
};

// A step's answers completed on a reaction (a push summed there) are sent
// from several threads at once: each answer's StartWrite costs ~24 us of
// the sending thread (here; one answer per worker, each on its own
// connection), so N answers sent one after another made a small push/pull
// grow by that per worker. SpreadAnswers runs up to kPsAnswersHere of them
// on the calling thread alone; more are cut into one group per thread of
// `pool` plus one, the caller sending one group (at most kPsInlineReplies
// answers: gRPC runs every reaction of a process on a few threads) and the
// pool the others, shared as evenly as can be, each group one task ahead of
// queued reductions (ReducePool::ScheduleFirst). No lock held.
inline constexpr size_t kPsAnswersHere = 2;
inline constexpr size_t kPsInlineReplies = 4;
void SpreadAnswers(PsCompletions done, ReducePool* pool);

// A push read on a gRPC reaction (PushPull, PushPullStream): summed here
// when it has at most deps.inline_bytes float32 bytes and PsStore::TryPush
// can (its answers: SpreadAnswers), else on deps.pool; counted in
// deps.traffic by where. Call with no lock held.
void SumPush(DecodedFrame frame, Reply reply, const PsStreamDeps& deps);

// A new reactor for one PushPullStream call (deletes itself when done).
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewPushPullStreamReactor(
    const PsStreamDeps& deps, grpc::CallbackServerContext* ctx);

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_PS_PS_STREAM_H_
