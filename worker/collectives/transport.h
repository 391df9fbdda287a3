// worker/collectives: collective algorithms (ring.h, halving_doubling.h,
// recursive_doubling.h, hierarchical.h; chosen through allreduce.h) over the
// Transport interface below, and its implementations in
// transport/{grpc,inproc}.
//
// What collectives see of the network: tagged, ordered chunk streams between
// ranks. Knows nothing of algorithms; only its gRPC implementation includes
// <grpcpp/...>.
#ifndef GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_H_
#define GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/wire_dtype.h"

namespace gradsync {

// Which part of a collective a message belongs to (every algorithm tags
// with it). The values are the wire encoding (TensorHeader.phase); a
// received frame may carry any int32, which ChunkTag comparison then
// rejects.
enum class CollectivePhase : int32_t {
  kReduceScatter = 0,   // ring
  kAllgather = 1,       // ring
  kBroadcast = 2,       // ring broadcast
  kFoldIn = 3,          // non-power-of-two pre-step: extra rank -> partner
  kHalving = 4,         // recursive halving (reduce-scatter)
  kDoubling = 5,        // recursive doubling (allgather, or small allreduce)
  kFoldOut = 6,         // non-power-of-two post-step: partner -> extra rank
  kGroupReduce = 7,     // hierarchical: members -> group leader
  kGroupBroadcast = 8,  // hierarchical: group leader -> members
};

// "reduce-scatter", "allgather", "broadcast", ...; "phase N" for values
// that are no CollectivePhase.
inline std::string CollectivePhaseName(CollectivePhase phase) {
  switch (phase) {
    case CollectivePhase::kReduceScatter:
      return "reduce-scatter";
    case CollectivePhase::kAllgather:
      return "allgather";
    case CollectivePhase::kBroadcast:
      return "broadcast";
    case CollectivePhase::kFoldIn:
      return "fold-in";
    case CollectivePhase::kHalving:
      return "halving";
    case CollectivePhase::kDoubling:
      return "doubling";
    case CollectivePhase::kFoldOut:
      return "fold-out";
    case CollectivePhase::kGroupReduce:
      return "group-reduce";
    case CollectivePhase::kGroupBroadcast:
      return "group-broadcast";
  }
  return absl::StrFormat("phase %d", static_cast<int32_t>(phase));
}

// Identifies one message of one collective; the job is implied by the
// transport. A receiver states the tag it expects, so a stray or reordered
// message is detected instead of being summed.
struct ChunkTag {
  int64_t step = 0;
  int32_t bucket = 0;
  CollectivePhase phase = CollectivePhase::kReduceScatter;
  int32_t index = 0;    // step within the phase
  int32_t segment = 0;  // pipelining unit within the chunk

  bool operator==(const ChunkTag& o) const {
    return step == o.step && bucket == o.bucket && phase == o.phase && index == o.index &&
           segment == o.segment;
  }
  // E.g. "(step 3 bucket 0 allgather index 1 segment 0)".
  std::string ToString() const {
    return absl::StrFormat("(step %d bucket %d %s index %d segment %d)", step, bucket,
                           CollectivePhaseName(phase), index, segment);
  }
};

// The tag of segment `segment` of message `index` of `phase`.
inline ChunkTag MakeTag(int64_t step, int bucket, CollectivePhase phase, int index,
                        size_t segment) {
  ChunkTag t;
  t.step = step;
  t.bucket = bucket;
  t.phase = phase;
  t.index = index;
  t.segment = static_cast<int32_t>(segment);
  return t;
}

// Floats per pipelining segment of `segment_bytes` (at least 1).
inline size_t SegmentElems(size_t segment_bytes) {
  return segment_bytes / sizeof(float) > 0 ? segment_bytes / sizeof(float) : 1;
}

// A received chunk; owns (references to) the received bytes.
class RecvChunk {
 public:
  virtual ~RecvChunk() = default;
  virtual size_t count() const = 0;
  virtual uint64_t checksum() const = 0;  // sender-provided, 0 if none
  virtual void CopyTo(float* dst) const = 0;
  virtual void AddTo(float* dst) const = 0;
  // out[i] = a[i] + data[i], and out2[i] too when out2 is not null (out2 may
  // alias a). The per-element order is a + data, as AddTo's.
  virtual void SumTo(const float* a, float* out, float* out2) const = 0;
};

// Thread-compatible for Send/Recv (one collective thread at a time);
// Abort() may be called from any thread.
class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The element format messages travel in; equal on every rank of a job.
  virtual WireDtype wire_dtype() const { return WireDtype::kFp32; }

  // Queues data[0..n) for `peer`; returns without waiting for the network.
  // The payload is copied before Send returns (the gRPC transport into a
  // pooled send block, see docs/architecture.md "Send blocks"; the
  // in-process one into the receiver's queue), so the caller may reuse or
  // free `data` at once. Messages to one peer arrive in order. Sends never
  // block: what a sender queues is bounded by what its algorithm sends ahead
  // of what it receives; receivers hold a bounded number of unconsumed
  // messages per peer and stop reading beyond that (backpressure through
  // HTTP/2 flow control).
  //
  // With a 16-bit wire_dtype(), data[0..n) is rounded in place to the values
  // the peer receives (RoundToWire): a rank never goes on from a value its
  // peers do not have, so every algorithm's replicas stay bit-identical.
  virtual absl::Status Send(int peer, const ChunkTag& tag, float* data, size_t n,
                            uint64_t checksum = 0) = 0;

  // Sends a[0..n) + chunk (n = chunk.count()) to `peer`, as Send would send
  // that sum, and stores the sum as sent (rounded to the wire dtype) into
  // store[0..n) when store is not null (store may alias a). The gRPC
  // transport computes the sum straight into the frame it sends: no pass
  // over the data beyond the reduction (and, for 16-bit formats, the
  // conversion).
  virtual absl::Status SendSum(int peer, const ChunkTag& tag, const float* a,
                               const RecvChunk& chunk, float* store);

  // Sends the data of a received chunk on to `peer` under `tag`. The gRPC
  // transport sends the received bytes themselves (no copy); the chunk may
  // be dropped at once.
  virtual absl::Status Forward(int peer, const ChunkTag& tag, const RecvChunk& chunk,
                               uint64_t checksum = 0);

  // Next message from `peer`. FAILED_PRECONDITION if it does not carry
  // `expected` or has a count other than `n`; DEADLINE_EXCEEDED at the
  // deadline; the abort status after Abort(); UNAVAILABLE if the peer's
  // connection broke.
  virtual absl::StatusOr<std::unique_ptr<RecvChunk>> Recv(int peer,
                                                          const ChunkTag& expected,
                                                          size_t n,
                                                          absl::Time deadline) = 0;

  // Waits until the transport holds no reference to memory passed to Send.
  // Send copies, so both transports return OK at once; collectives still
  // call it at the end of a Run so that a transport that lends the caller's
  // memory to the network can be added without changing them.
  virtual absl::Status WaitSendsReleased(absl::Time deadline) = 0;

  // Fails pending and future calls with `status` (non-OK). Idempotent.
  virtual void Abort(const absl::Status& status) = 0;

  // Says that the messages sent and received from now on belong to one
  // collective over `bytes` bytes (the whole tensor, not one message).
  // Every rank calls it with the same value at the same point (the
  // collectives do, at the start of each run), so a transport may choose
  // its connections by it: the gRPC one sends the messages of large
  // collectives on its bulk connections (GrpcTransportOptions.bulk_bytes).
  virtual void BeginCollective(size_t bytes) { (void)bytes; }
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_H_
