// Merging the ranks' measurements of a bench job into its result (plain
// code, no state: the job table calls it once every rank reported).
#ifndef GRADSYNC_SERVER_COORDINATOR_BENCH_MERGE_H_
#define GRADSYNC_SERVER_COORDINATOR_BENCH_MERGE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

// result.bench from every rank's JobDone.bench (`results` in rank order):
// per size, per iteration the slowest rank, time = the median of those; a
// row is ok when every rank verified every iteration; α, β and the host
// groups are rank 0's, each of the two links the lowest rank's that has it
// (the rank that measured it).
// INTERNAL when `results` is empty or a rank's rows do not match the spec's
// sizes and iters.
absl::StatusOr<v1::BenchResult> MergeBenchResults(
    const v1::BenchSpec& spec, const std::vector<v1::WorkerMessage::JobDone>& results);

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_BENCH_MERGE_H_
