#include "common/cost_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/ps_layout.h"

namespace gradsync {
int FloorLog2(int n) {
  int l = 0;
  while ((2 << l) <= n) ++l;
  return l;
}

namespace {

// A pipelined chain over `ranks` ranks (RingBroadcast, or hier's in-group
// phases): s = ⌈K/seg⌉ segments of seg = min(K, segment_bytes), each behind
// the one before on every hop: (ranks − 2 + s)·(α + seg/β); 0 for one rank.
double Chain(int ranks, double k, int64_t segment_bytes, double a, double b) {
  if (ranks < 2) return 0.0;
  const double seg = std::max(1.0, std::min(k, static_cast<double>(segment_bytes)));
  const double segments = std::max(1.0, std::ceil(k / seg));
  return (ranks - 2 + segments) * (a + seg / b);
}

double Ring(int n, double k, double a, double b) {
  return 2.0 * (n - 1) * a + 2.0 * (n - 1) / n * k / b;
}

// The ring over `in.groups` (see the header): C crossing hops, M of them
// leaving the busiest host.
double GroupedRing(const CostInputs& in, double a_local, double b_local) {
  const int n = in.world;
  const double k = static_cast<double>(in.bytes);
  std::map<int, int> leaving;  // group -> crossing hops that leave it
  int crossing = 0;
  for (int r = 0; r < n; ++r) {
    const int from = in.groups[r], to = in.groups[(r + 1) % n];
    if (from != to) {
      ++crossing;
      ++leaving[from];
    }
  }
  int busiest = 0;
  for (const auto& [group, hops] : leaving) busiest = std::max(busiest, hops);
  double per_byte = 0;
  if (crossing > 0) per_byte = busiest / in.beta;
  if (crossing < n) per_byte = std::max(per_byte, 1.0 / b_local);
  const double hop = (crossing * in.alpha + (n - crossing) * a_local) / n;
  return 2.0 * (n - 1) * hop + 2.0 * (n - 1) / n * k * per_byte;
}

// One round of messages of m bytes, `sends` as (from, to) ranks, over
// `in.groups`: the slower of the links between hosts (α, and the busiest
// host's bytes out or in over β) and inside a host (α_l + m/β_l).
double GroupedRound(const CostInputs& in, const std::vector<std::pair<int, int>>& sends,
                    double m, double a_local, double b_local) {
  std::map<int, double> out, into;  // group -> bytes crossing out / in
  bool local = false;
  for (const auto& [from, to] : sends) {
    const int g = in.groups[from], h = in.groups[to];
    if (g == h) {
      local = true;
    } else {
      out[g] += m;
      into[h] += m;
    }
  }
  double busiest = 0;
  for (const auto& [g, bytes] : out) busiest = std::max(busiest, bytes);
  for (const auto& [g, bytes] : into) busiest = std::max(busiest, bytes);
  double t = busiest > 0 ? in.alpha + busiest / in.beta : 0.0;
  if (local) t = std::max(t, a_local + m / b_local);
  return t;
}

// Halving-doubling (hd) or recursive doubling (tree) over `in.groups`,
// round by round as power_of_two.h folds the world and pairs its ranks:
// extra rank 2i+1 (i < N − P) folds into 2i, virtual rank v is real rank 2v
// (v < N − P) or v + N − P. hd's halving round k pairs v with v ^ (P >> k+1)
// over K/2^(k+1) bytes, and its doubling rounds mirror them; tree's round j
// pairs v with v ^ 2^j over K bytes.
double GroupedPowerOfTwo(bool halving, const CostInputs& in, double a_local,
                         double b_local) {
  const int n = in.world;
  const double k = static_cast<double>(in.bytes);
  const int levels = FloorLog2(n), p = 1 << levels, extra = n - p;
  const auto real = [&](int v) { return v < extra ? 2 * v : v + extra; };
  double t = 0;
  for (int round = 0; round < levels; ++round) {
    const int distance = halving ? p >> (round + 1) : 1 << round;
    const double m = halving ? k / (2 << round) : k;
    std::vector<std::pair<int, int>> sends;
    for (int v = 0; v < p; ++v) sends.emplace_back(real(v), real(v ^ distance));
    t += (halving ? 2.0 : 1.0) * GroupedRound(in, sends, m, a_local, b_local);
  }
  if (extra > 0) {
    std::vector<std::pair<int, int>> in_sends, out_sends;
    for (int i = 0; i < extra; ++i) {
      in_sends.emplace_back(2 * i + 1, 2 * i);
      out_sends.emplace_back(2 * i, 2 * i + 1);
    }
    t += GroupedRound(in, in_sends, k, a_local, b_local) +
         GroupedRound(in, out_sends, k, a_local, b_local);
  }
  return t;
}

double Allreduce(v1::Algorithm algorithm, const CostInputs& in) {
  const int n = in.world;
  const double k = static_cast<double>(in.bytes), a = in.alpha, b = in.beta;
  const int lp = FloorLog2(n);
  const int p = 1 << lp;
  const double fold = n != p ? 2.0 * (a + k / b) : 0.0;
  const double a_local = in.local_alpha > 0 ? in.local_alpha : a;
  const double b_local = in.local_beta > 0 ? in.local_beta : b;
  switch (algorithm) {
    case v1::ALGORITHM_HALVING_DOUBLING:
      if (!in.groups.empty()) {
        return GroupedPowerOfTwo(/*halving=*/true, in, a_local, b_local);
      }
      return 2.0 * lp * a + 2.0 * (p - 1) / p * k / b + fold;
    case v1::ALGORITHM_RECURSIVE_DOUBLING:
      if (!in.groups.empty()) {
        return GroupedPowerOfTwo(/*halving=*/false, in, a_local, b_local);
      }
      return lp * (a + k / b) + fold;
    case v1::ALGORITHM_HIERARCHICAL: {
      if (in.groups.empty()) return Ring(n, k, a, b);
      std::map<int, int> sizes;  // group -> ranks
      int l = 0;
      for (int g : in.groups) l = std::max(l, ++sizes[g]);
      const int leaders = static_cast<int>(sizes.size());
      return 2.0 * Chain(l, k, in.segment_bytes, a_local, b_local) +
             Ring(leaders, k, a, b);
    }
    default:
      return in.groups.empty() ? Ring(n, k, a, b) : GroupedRing(in, a_local, b_local);
  }
}

}  // namespace

double PushPullLinkFactor(int world, int ps_shards, int64_t bytes,
                          int64_t partition_bytes) {
  const int64_t k = std::max<int64_t>(1, bytes);
  const int64_t partition =
      partition_bytes > 0 ? partition_bytes : static_cast<int64_t>(kPsPartitionBytes);
  const int64_t p = (k + partition - 1) / partition;
  const int64_t s = std::max(1, ps_shards);
  const double per_shard = static_cast<double>((p + s - 1) / s) / p;  // of K
  const double link = std::max(1.0, std::max(1, world) * per_shard);
  return p > 1 ? link : 2.0 * link;
}

absl::StatusOr<double> PredictSeconds(v1::BenchOp op, v1::Algorithm algorithm,
                                      const CostInputs& in) {
  if (in.world < 1 || in.bytes < 0 || !(in.alpha >= 0) || !(in.beta > 0) ||
      !(in.local_alpha >= 0) || !(in.local_beta >= 0) || in.ps_shards < 1 ||
      in.segment_bytes < 1 ||
      (!in.groups.empty() && in.groups.size() != static_cast<size_t>(in.world))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cost model: bad inputs (world ", in.world, ", bytes ", in.bytes, ", alpha ",
        in.alpha, ", beta ", in.beta, ", local alpha ", in.local_alpha, ", local beta ",
        in.local_beta, ", ps_shards ", in.ps_shards, ", segment_bytes ", in.segment_bytes,
        ", groups of ", in.groups.size(), " ranks)"));
  }
  const double k = static_cast<double>(in.bytes), a = in.alpha, b = in.beta;
  switch (op) {
    case v1::BENCH_OP_ALLREDUCE:
      return in.world == 1 ? 0.0 : Allreduce(algorithm, in);
    case v1::BENCH_OP_BROADCAST:
      return Chain(in.world, k, in.segment_bytes, a, b);
    case v1::BENCH_OP_PUSHPULL:
      return PushPullLinkFactor(in.world, in.ps_shards, in.bytes, in.ps_partition_bytes) *
                 k / b +
             2.0 * a;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("cost model: unknown op ", static_cast<int>(op)));
}

}  // namespace gradsync
