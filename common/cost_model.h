// The α-β cost model of DESIGN.md ("Cost model"): predicted seconds of one
// collective for a world size, a message size and a link measured as latency
// α (seconds per message) and bandwidth β (bytes per second). Benchmarks
// print measured time next to it (`gradsync bench`).
//
// Plain arithmetic: no I/O, no threads; thread-safe.
#ifndef GRADSYNC_COMMON_COST_MODEL_H_
#define GRADSYNC_COMMON_COST_MODEL_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

struct CostInputs {
  int world = 1;                  // N, ranks taking part
  int64_t bytes = 0;              // K, message size per rank
  double alpha = 0;               // seconds per message
  double beta = 0;                // bytes per second per link
  int ps_shards = 1;              // pushpull: S
  int64_t segment_bytes = 1 << 20;  // broadcast pipelining unit
  int group_size = 1;             // hierarchical: ranks per host group
  int64_t ps_partition_bytes = 4 << 20;  // pushpull: largest partition
};

// Predicted seconds, with P = the largest power of two <= N and
// fold = (N != P ? 2·(α + K/β) : 0) (the extra ranks' fold-in / fold-out):
//  allreduce ring:  2(N−1)·α + 2(N−1)/N·K/β
//            hd:    2·log2(P)·α + 2(P−1)/P·K/β + fold
//            tree:  log2(P)·(α + K/β) + fold   (recursive doubling)
//            hier:  groups of L = group_size: 2·⌈log2 L⌉·(α + K/β) (reduce to
//                   and broadcast from the leader) + ring over the N/L
//                   leaders; with L = 1 this is the ring.
//            auto / unspecified: as ring (callers pass the algorithm that
//                   actually ran).
//  broadcast (ring, pipelined, root 0): segments s = ⌈K/seg⌉ of
//                   seg = min(K, segment_bytes): (N−2+s)·(α + seg/β).
//  pushpull (S shards on hosts of their own, the tensor laid out as
//           common/ps_layout.h does, in partitions of ps_partition_bytes):
//           PushPullLinkFactor(N, S, K, ps_partition_bytes)·K/β + 2α.
// 0 for N = 1 (nothing crosses a link). INVALID_ARGUMENT for N < 1, K < 0,
// α < 0, β <= 0, S < 1, segment_bytes < 1, group_size < 1, or an unknown op.
// The bytes the busiest link of a push/pull moves in one direction, per byte
// of K. K is cut into P = ⌈K / partition_bytes⌉ partitions, round-robin
// over S shards, so the busiest shard holds ⌈P/S⌉·K/P and its link carries
// N times that; a worker's link carries K. With P ≥ 2 the answers (pulls) of
// earlier partitions travel while later ones are pushed, on the other
// direction of each link: max(K, N·⌈P/S⌉·K/P) / K. With one partition the
// pull waits for every push: twice that. (N, S, K ≥ 1; partition_bytes ≤ 0
// means kPsPartitionBytes.)
double PushPullLinkFactor(int world, int ps_shards, int64_t bytes,
                          int64_t partition_bytes = 0);

// floor(log2 n) for n >= 1 (0 for n <= 1): P = 1 << FloorLog2(N) above.
int FloorLog2(int n);

absl::StatusOr<double> PredictSeconds(v1::BenchOp op, v1::Algorithm algorithm,
                                      const CostInputs& in);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_COST_MODEL_H_
