// The allreduce algorithms, as the collectives and the tuning table know them
// (no wire types: the job entry converts v1::Algorithm once, job_spec.h).
#ifndef GRADSYNC_COMMON_SPEC_ALLREDUCE_ALGORITHM_H_
#define GRADSYNC_COMMON_SPEC_ALLREDUCE_ALGORITHM_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradsync {

enum class AllreduceAlgorithm {
  kAuto,               // what the tuning table picks for (world, bytes)
  kRing,               // pipelined ring (worker/collectives/ring.h)
  kHalvingDoubling,    // Rabenseifner (halving_doubling.h)
  kRecursiveDoubling,  // full-vector exchanges (recursive_doubling.h);
                       // "tree" on the command line and the wire
  kHierarchical,       // inside host groups, then across (hierarchical.h)
};

// "auto", "ring", "hd", "tree", "hier": the spelling of the command line,
// tuning tables and results files.
absl::string_view AllreduceAlgorithmName(AllreduceAlgorithm algorithm);
// The inverse of AllreduceAlgorithmName; INVALID_ARGUMENT naming the choices
// for anything else.
absl::StatusOr<AllreduceAlgorithm> ParseAllreduceAlgorithm(absl::string_view text);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_SPEC_ALLREDUCE_ALGORITHM_H_
