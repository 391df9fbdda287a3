// The allreduce algorithms, as the collectives and the tuning table know them
// (no wire types: the job entry converts v1::Algorithm once, job_spec.h).
#ifndef GRADSYNC_COMMON_SPEC_ALLREDUCE_ALGORITHM_H_
#define GRADSYNC_COMMON_SPEC_ALLREDUCE_ALGORITHM_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradsync {

enum class AllreduceAlgorithm {
  kAuto,               // what the tuning table picks for (world, bytes)
  kRing,               // pipelined ring (worker/collectives/ring.h)
  kHalvingDoubling,    // Rabenseifner (halving_doubling.h)
  kRecursiveDoubling,  // full-vector exchanges (recursive_doubling.h), "rd"
  kHierarchical,       // inside host groups, then across (hierarchical.h)
};

// "auto", "ring", "hd", "rd", "hier": the spelling of the command line,
// tuning tables and results files.
absl::string_view AllreduceAlgorithmName(AllreduceAlgorithm algorithm);
// The inverse of AllreduceAlgorithmName, which also reads the old spelling
// kOldRecursiveDoublingName; INVALID_ARGUMENT naming the choices for
// anything else.
absl::StatusOr<AllreduceAlgorithm> ParseAllreduceAlgorithm(absl::string_view text);

// Recursive doubling was called "tree" until the name was freed for a real
// tree algorithm (a pipelined reduce-then-broadcast tree, issue 47). The
// old spelling is still read (command lines, tuning tables and results
// files written before) and means recursive doubling until that lands;
// whoever reads it from a user prints OldAlgorithmSpellingNote.
inline constexpr absl::string_view kOldRecursiveDoublingName = "tree";
// A line telling the user that `text` is the old spelling and what to write
// instead; "" for any other text.
std::string OldAlgorithmSpellingNote(absl::string_view text);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_SPEC_ALLREDUCE_ALGORITHM_H_
