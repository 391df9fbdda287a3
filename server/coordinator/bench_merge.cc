#include "server/coordinator/bench_merge.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gradsync {
namespace {

using JobDone = v1::WorkerMessage::JobDone;

// INTERNAL naming the rank and row whose shape differs from the spec.
absl::Status CheckShapes(const v1::BenchSpec& spec, const std::vector<JobDone>& results) {
  if (results.empty()) return absl::InternalError("bench: no rank reported");
  for (size_t r = 0; r < results.size(); ++r) {
    const v1::BenchRankResult& b = results[r].bench();
    if (b.rows_size() != spec.sizes_size()) {
      return absl::InternalError(absl::StrCat("bench: rank ", r, " reported ",
                                              b.rows_size(), " rows, expected ",
                                              spec.sizes_size()));
    }
    for (int i = 0; i < b.rows_size(); ++i) {
      if (b.rows(i).bytes() != spec.sizes(i) ||
          b.rows(i).iteration_seconds_size() != spec.iters()) {
        return absl::InternalError(
            absl::StrCat("bench: rank ", r, " row ", i, " has ", b.rows(i).bytes(),
                         " bytes and ", b.rows(i).iteration_seconds_size(),
                         " iterations, expected ", spec.sizes(i), " and ", spec.iters()));
      }
    }
  }
  return absl::OkStatus();
}

// Row i over all ranks (shapes checked): per iteration the slowest rank,
// then the median over iterations.
v1::BenchRow MergeRow(const std::vector<JobDone>& results, int iters, int i) {
  v1::BenchRow row;
  row.set_bytes(results[0].bench().rows(i).bytes());
  row.set_algorithm(results[0].bench().rows(i).algorithm());
  row.set_ok(true);
  std::vector<double> slowest(iters, 0.0);
  for (size_t r = 0; r < results.size(); ++r) {
    const v1::BenchRankRow& rr = results[r].bench().rows(i);
    for (int t = 0; t < iters; ++t) {
      row.add_rank_iteration_seconds(rr.iteration_seconds(t));
      slowest[t] = std::max(slowest[t], rr.iteration_seconds(t));
    }
    if (!rr.ok() && row.ok()) {
      row.set_ok(false);
      row.set_error(absl::StrCat("rank ", r, ": ", rr.error()));
    }
  }
  for (double s : slowest) row.add_iteration_seconds(s);
  std::sort(slowest.begin(), slowest.end());
  const size_t m = slowest.size();
  if (m > 0) {
    row.set_time_seconds(m % 2 == 1 ? slowest[m / 2]
                                    : (slowest[m / 2 - 1] + slowest[m / 2]) / 2);
  }
  return row;
}

}  // namespace

absl::StatusOr<v1::BenchResult> MergeBenchResults(const v1::BenchSpec& spec,
                                                  const std::vector<JobDone>& results) {
  absl::Status st = CheckShapes(spec, results);
  if (!st.ok()) return st;
  v1::BenchResult res;
  res.set_alpha_seconds(results[0].bench().alpha_seconds());
  res.set_beta_bytes_per_second(results[0].bench().beta_bytes_per_second());
  // Each link from the lowest rank that reports it (its pair's first rank).
  for (const JobDone& done : results) {
    const v1::BenchRankResult& b = done.bench();
    if (b.has_between_hosts() && !res.has_between_hosts()) {
      *res.mutable_between_hosts() = b.between_hosts();
    }
    if (b.has_inside_host() && !res.has_inside_host()) {
      *res.mutable_inside_host() = b.inside_host();
    }
  }
  *res.mutable_host_groups() = results[0].bench().host_groups();
  res.set_iters(spec.iters());
  for (int i = 0; i < spec.sizes_size(); ++i) {
    *res.add_rows() = MergeRow(results, spec.iters(), i);
  }
  return res;
}

}  // namespace gradsync
