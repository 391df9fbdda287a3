// What one rank of a bench job measured (BenchRunner::Run), as plain
// structs; the worker daemon sends them as the wire's BenchRankResult
// (worker/job_reports.h), the coordinator merges the ranks (bench_merge.h).
#ifndef GRADSYNC_WORKER_BENCH_JOB_BENCH_RESULT_H_
#define GRADSYNC_WORKER_BENCH_JOB_BENCH_RESULT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/spec/job_options.h"

namespace gradsync {

// One size as this rank measured it.
struct BenchRankRow {
  int64_t bytes = 0;
  std::string algorithm;                  // what actually ran ("ring", "hd", "ps", ...)
  std::vector<double> iteration_seconds;  // one per timed iteration
  bool ok = true;                         // every timed result verified exactly
  std::string error;                      // the first verification failure, if any
};

// A link measured by ping-pong between two ranks.
struct BenchLink {
  int rank_a = -1;  // the rank that sends first
  int rank_b = -1;
  double alpha_seconds = 0;
  double beta_bytes_per_second = 0;
};

struct BenchRankResult {
  // Ranks 0 and 1's link (rank 0 only).
  double alpha_seconds = 0;
  double beta_bytes_per_second = 0;
  std::vector<BenchRankRow> rows;  // in BenchOptions.sizes order
  // Reported by each measured pair's first rank.
  std::optional<BenchLink> between_hosts;
  std::optional<BenchLink> inside_host;
  std::vector<int> host_groups;  // the host group of each rank, by rank
};

// "allreduce", "broadcast", "pushpull": the command line's spelling.
inline const char* BenchOpName(BenchOp op) {
  switch (op) {
    case BenchOp::kAllreduce:
      return "allreduce";
    case BenchOp::kBroadcast:
      return "broadcast";
    case BenchOp::kPushPull:
      return "pushpull";
  }
  return "unknown";
}

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_BENCH_JOB_BENCH_RESULT_H_
