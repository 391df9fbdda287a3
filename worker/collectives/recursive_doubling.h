// Recursive-doubling allreduce: the latency-optimised algorithm for small
// vectors (kRecursiveDoubling, "tree"): log2(p) rounds, each a full-vector exchange.
#ifndef GRADSYNC_WORKER_COLLECTIVES_RECURSIVE_DOUBLING_H_
#define GRADSYNC_WORKER_COLLECTIVES_RECURSIVE_DOUBLING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/partition.h"
#include "worker/collectives/allreduce.h"
#include "worker/collectives/power_of_two.h"
#include "worker/collectives/transport.h"

namespace gradsync {

// Sum-allreduce of `count` floats in log2(p) rounds (p = largest power of two
// <= N); every round sends the whole vector, so it moves log2(p)·K bytes per
// rank against the ring's 2K(N-1)/N but waits for log2(p) latencies instead
// of 2(N-1). Built once, Run every step. Not thread-safe; one Run at a time.
//
// Bit-identical results: after round j, every rank of a block of 2^(j+1)
// virtual ranks holds the sum of that block, computed as
// (sum of its lower half) + (sum of its upper half): the same expression
// tree on every rank, because both halves are themselves bit-identical on
// all their members (induction on j). The lower partner evaluates
// lower + upper, the upper one upper + lower (RecvChunk::SumTo computes
// own + received); IEEE-754 addition is commutative bit for bit for every
// pair of non-NaN operands (signed zeros and infinities included), so the
// results are identical. Only when both operands are NaN can the payload
// bits of the NaN differ between ranks (x86 returns the first operand's).
class RecursiveDoublingAllreduce final : public Allreduce {
 public:
  RecursiveDoublingAllreduce(Transport* transport, size_t count,
                             AllreduceOptions options = {});

  // Sums data[0..count) across ranks, in place. On error the contents of
  // `data` are unspecified and the transport should be aborted. Each
  // message is one segment of the vector (AllreduceOptions::segment_bytes),
  // segment t tagged with segment t, all sent and received in address order.
  // Partner in round j: virtual rank v ^ 2^j (PowerOfTwoFold).
  //
  // Protocol for virtual rank v of p (L = log2 p rounds):
  //  1. If an extra rank is folded into us: receive its segments
  //     (kFoldIn, 0) and for each store data + it into data and send that
  //     sum to the round-0 partner (kDoubling, 0) in one pass
  //     (Transport::SendSum). Otherwise send our segments to the round-0
  //     partner, kSendAhead segments ahead of step 2's receives.
  //  2. For j = 0..L-1: receive each segment from the round-j partner,
  //     (kDoubling, j), and store data + it into data; unless j = L-1 the
  //     same pass sends it to the round-(j+1) partner as (kDoubling, j+1),
  //     so round j+1 starts while round j is still arriving. In round L-1
  //     the sum is final; if an extra rank is folded into us the pass sends
  //     it to that rank as (kFoldOut, 0).
  //  3. Wait until the transport released our memory.
  // An extra rank sends its segments to its partner (kFoldIn, 0), then
  // receives the result (kFoldOut, 0) into data.
  absl::Status Run(float* data, int64_t step, int bucket) override;
  AllreduceAlgorithm algorithm() const override {
    return AllreduceAlgorithm::kRecursiveDoubling;
  }

 private:
  // Steps 1 and 2 (the exchange with the round-0 partner when nothing is
  // folded into us is part of step 2's first round).
  absl::Status FoldIn(float* data, int64_t step, int bucket, absl::Time deadline);
  absl::Status Round(int j, bool send_round0, float* data, int64_t step, int bucket,
                     absl::Time deadline);
  absl::Status RunExtra(float* data, int64_t step, int bucket, absl::Time deadline);
  int Partner(int j) const;  // real rank of the round-j partner

  // Constant after construction.
  Transport* const transport_;
  const size_t count_;
  const AllreduceOptions options_;
  const PowerOfTwoFold fold_;
  const int rank_;
  const int vrank_;                // -1 for an extra rank
  const int fold_peer_;            // -1 when not in a fold pair
  const std::vector<Range> segs_;  // the whole vector, address order
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_RECURSIVE_DOUBLING_H_
