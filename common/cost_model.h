// The α-β cost model of docs/architecture.md ("Cost model"): predicted seconds of one
// collective for a world size, a message size and a link measured as latency
// α (seconds per message) and bandwidth β (bytes per second). Benchmarks
// print measured time next to it (`gradsync bench`).
//
// Plain arithmetic: no I/O, no threads; thread-safe.
#ifndef GRADSYNC_COMMON_COST_MODEL_H_
#define GRADSYNC_COMMON_COST_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

struct CostInputs {
  int world = 1;                         // N, ranks taking part
  int64_t bytes = 0;                     // K, message size per rank
  double alpha = 0;                      // seconds per message (between hosts)
  double beta = 0;                       // bytes per second per link (between hosts)
  int ps_shards = 1;                     // pushpull: S
  int64_t segment_bytes = 1 << 20;       // broadcast pipelining unit
  int64_t ps_partition_bytes = 4 << 20;  // pushpull: largest partition
  // The host group of each rank (size N), ranks of one group sharing a
  // host; empty: every rank on a host of its own.
  std::vector<int> groups;
  // The link between two ranks of one group: α_l and β_l (0: α and β).
  double local_alpha = 0;
  double local_beta = 0;
};

// Predicted seconds, with P = the largest power of two <= N and
// fold = (N != P ? 2·(α + K/β) : 0) (the extra ranks' fold-in / fold-out):
//  allreduce ring:  2(N−1)·α + 2(N−1)/N·K/β, with every rank on a host of
//                   its own. With groups, C of the N hops r → r+1 (mod N)
//                   cross hosts and the rest stay inside one, and a rank's
//                   last chunk has come 2(N−1) hops round the ring, so
//                   2(N−1)·(C·α + (N−C)·α_l)/N + 2(N−1)/N·K·p, where p is
//                   the slowest link's seconds per byte: M/β for the host
//                   that M crossing hops leave (M = 1 when there are several
//                   hosts, each with consecutive ranks), 1/β_l for the hops
//                   inside a host. The latency is the mean hop's: the slowest
//                   rank's path can hold one crossing more (N = 3, groups
//                   {0,0,1}: 3 crossings, where the mean counts 2.67).
//            hd:    2·log2(P)·α + 2(P−1)/P·K/β + fold
//            tree:  log2(P)·(α + K/β) + fold   (recursive doubling)
//                   With groups, hd and rd round by round as the code
//                   pairs ranks (hd: halving round k over K/2^(k+1) bytes at
//                   distance P/2^(k+1), doubling mirrored; tree: round j over
//                   K at distance 2^j; the fold's two rounds over K), each
//                   round the slower of its link kinds: α + (the busiest
//                   host's bytes out or in)/β between hosts, α_l + m/β_l
//                   inside one. Without groups this is the line above.
//                   The code overlaps consecutive rounds, so where their
//                   link kinds differ this is an upper bound.
//            hier:  groups of at most L ranks (from `groups`; L = 1 without):
//                   a chain inside each group, pipelined by segment, reduces
//                   to the leader and another broadcasts from it, each
//                   (L−2+s)·(α_l + seg/β_l) for L ≥ 2 with the broadcast's
//                   seg and s below; between them the ring over the G
//                   groups' leaders (α, β). With L = 1 this is the ring.
//            auto / unspecified: as ring (callers pass the algorithm that
//                   actually ran).
//  broadcast (ring, pipelined, root 0): segments s = ⌈K/seg⌉ of
//                   seg = min(K, segment_bytes): (N−2+s)·(α + seg/β).
//  pushpull (S shards on hosts of their own, the tensor laid out as
//           common/ps_layout.h does, in partitions of ps_partition_bytes):
//           PushPullLinkFactor(N, S, K, ps_partition_bytes)·K/β + 2α.
// Broadcast and pushpull use α and β whatever the groups.
// 0 for N = 1 (nothing crosses a link). INVALID_ARGUMENT for N < 1, K < 0,
// α < 0, β <= 0, α_l < 0, β_l < 0, S < 1, segment_bytes < 1, groups of a
// size other than N, or an unknown op.
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
