#include "common/cost_model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/ps_layout.h"

namespace gradsync {
int FloorLog2(int n) {
  int l = 0;
  while ((2 << l) <= n) ++l;
  return l;
}

namespace {

int CeilLog2(int n) {
  int l = 0;
  while ((1 << l) < n) ++l;
  return l;
}

double Ring(int n, double k, double a, double b) {
  return 2.0 * (n - 1) * a + 2.0 * (n - 1) / n * k / b;
}

double Allreduce(v1::Algorithm algorithm, const CostInputs& in) {
  const int n = in.world;
  const double k = static_cast<double>(in.bytes), a = in.alpha, b = in.beta;
  const int lp = FloorLog2(n);
  const int p = 1 << lp;
  const double fold = n != p ? 2.0 * (a + k / b) : 0.0;
  switch (algorithm) {
    case v1::ALGORITHM_HALVING_DOUBLING:
      return 2.0 * lp * a + 2.0 * (p - 1) / p * k / b + fold;
    case v1::ALGORITHM_TREE:
      return lp * (a + k / b) + fold;
    case v1::ALGORITHM_HIERARCHICAL: {
      const int l = std::min(in.group_size, n);
      const int leaders = (n + l - 1) / l;
      return 2.0 * CeilLog2(l) * (a + k / b) + Ring(leaders, k, a, b);
    }
    default:
      return Ring(n, k, a, b);
  }
}

}  // namespace

double PushPullLinkFactor(int world, int ps_shards, int64_t bytes,
                          int64_t partition_bytes) {
  const int64_t k = std::max<int64_t>(1, bytes);
  const int64_t partition = partition_bytes > 0
                                ? partition_bytes
                                : static_cast<int64_t>(kPsPartitionBytes);
  const int64_t p = (k + partition - 1) / partition;
  const int64_t s = std::max(1, ps_shards);
  const double per_shard = static_cast<double>((p + s - 1) / s) / p;  // of K
  const double link = std::max(1.0, std::max(1, world) * per_shard);
  return p > 1 ? link : 2.0 * link;
}

absl::StatusOr<double> PredictSeconds(v1::BenchOp op, v1::Algorithm algorithm,
                                      const CostInputs& in) {
  if (in.world < 1 || in.bytes < 0 || !(in.alpha >= 0) || !(in.beta > 0) ||
      in.ps_shards < 1 || in.segment_bytes < 1 || in.group_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cost model: bad inputs (world ", in.world, ", bytes ", in.bytes,
        ", alpha ", in.alpha, ", beta ", in.beta, ", ps_shards ", in.ps_shards,
        ", segment_bytes ", in.segment_bytes, ", group_size ", in.group_size,
        ")"));
  }
  const double k = static_cast<double>(in.bytes), a = in.alpha, b = in.beta;
  switch (op) {
    case v1::BENCH_OP_ALLREDUCE:
      return in.world == 1 ? 0.0 : Allreduce(algorithm, in);
    case v1::BENCH_OP_BROADCAST: {
      if (in.world == 1) return 0.0;
      const double seg = std::max(1.0, std::min(k, static_cast<double>(in.segment_bytes)));
      const double segments = std::max(1.0, std::ceil(k / seg));
      return (in.world - 2 + segments) * (a + seg / b);
    }
    case v1::BENCH_OP_PUSHPULL:
      return PushPullLinkFactor(in.world, in.ps_shards, in.bytes,
                                in.ps_partition_bytes) * k / b +
             2.0 * a;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("cost model: unknown op ", static_cast<int>(op)));
}

}  // namespace gradsync
