// Ring collectives over a Transport (Gloo style: built once per job with its
// sizes, Run() every step).
#ifndef GRADSYNC_WORKER_COLLECTIVES_RING_H_
#define GRADSYNC_WORKER_COLLECTIVES_RING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/partition.h"
#include "worker/collectives/allreduce.h"
#include "worker/collectives/transport.h"

namespace gradsync {

struct RingOptions {
  size_t segment_bytes = 1 << 20;              // pipelining unit
  absl::Duration timeout = absl::Seconds(30);  // per Run
  const Env* env = Env::Default();             // not owned; the deadline's clock
};

// Sum-allreduce of `count` floats: reduce-scatter then allgather around the
// ring rank -> rank+1, each chunk cut into segments that are pipelined (a
// segment is forwarded as soon as it is reduced). Every rank ends with
// bit-identical sums: each chunk is reduced in one fixed order (starting at
// its owner) and then copied around. Not thread-safe; one Run at a time.
class RingAllreduce final : public Allreduce {
 public:
  RingAllreduce(Transport* transport, size_t count, RingOptions options = {});

  // Sums data[0..count) across ranks, in place. On error the contents of
  // `data` are unspecified and the transport should be aborted.
  //
  // Protocol for rank r of N, chunks c = 0..N-1 (PartitionEven):
  //  1. Send every segment of chunk r as (kReduceScatter, index 0) (copied
  //     into send blocks: K/N bytes in send queues at most).
  //  2. For k = 0..N-2: receive each segment of chunk (r-k-1) mod N, tagged
  //     (kReduceScatter, index k), and send our data + it in one pass
  //     (Transport::SendSum): as (kReduceScatter, index k+1) if k < N-2;
  //     else the sum is final: it is also stored into data and sent as
  //     (kAllgather, index 0). Partial sums are never written to data.
  //  3. For k = 0..N-2: receive each segment of chunk (r-k) mod N tagged
  //     (kAllgather, index k), copy it into data; if k < N-2 forward the
  //     received bytes as (kAllgather, index k+1) (Transport::Forward).
  //  4. Wait until the transport released our memory.
  absl::Status Run(float* data, int64_t step, int bucket) override;
  AllreduceAlgorithm algorithm() const override { return AllreduceAlgorithm::kRing; }

 private:
  size_t Chunk(int c) const;  // index into chunks_ for (c mod N)

  Transport* const transport_;
  const size_t count_;
  const RingOptions options_;
  std::vector<std::vector<Range>> segments_;  // per chunk
};

// Broadcast of `count` floats from `root` around the ring, segment-pipelined.
// Non-root ranks check the root's checksum of the whole vector.
absl::Status RingBroadcast(Transport* transport, float* data, size_t count, int root,
                           size_t segment_bytes, absl::Time deadline);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_RING_H_
