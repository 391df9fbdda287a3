// Which allreduce algorithm AllreduceAlgorithm::kAuto runs: a table from (world size,
// message bytes) to an algorithm, built in (kDefaultTuningTable) or loaded
// from a file that `gradsync bench --tune` writes.
#ifndef GRADSYNC_COMMON_SPEC_TUNING_TABLE_H_
#define GRADSYNC_COMMON_SPEC_TUNING_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/spec/allreduce_algorithm.h"

namespace gradsync {

// The file format, one rule per line; '#' starts a comment; blank lines are
// ignored:
//
//   WORLD  MAX_BYTES  ALGORITHM
//
//   WORLD      a world size >= 1, or '*' for any world size
//   MAX_BYTES  the largest message (bytes) the rule covers: digits with an
//              optional KiB / MiB / GiB suffix, or 'inf'
//   ALGORITHM  ring, hd, rd or hier (AllreduceAlgorithmName; not auto)
//
// Choose(world, bytes) takes the rules for exactly `world`, then the '*'
// rules, each set in ascending MAX_BYTES, and returns the algorithm of the
// first rule with bytes <= MAX_BYTES; kRing when none covers it.
// Rule order in the file does not matter; two rules with the same WORLD and
// MAX_BYTES are an error.
//
// A plain value: immutable after construction, safe to share between threads.
class TuningTable {
 public:
  struct Rule {
    int world = 0;           // 0: any world size ('*')
    uint64_t max_bytes = 0;  // UINT64_MAX: 'inf'
    AllreduceAlgorithm algorithm = AllreduceAlgorithm::kRing;
  };

  // Parses the format above. INVALID_ARGUMENT "SOURCE:LINE: what is wrong"
  // for a bad line, and for a text without any rule.
  static absl::StatusOr<TuningTable> Parse(absl::string_view text,
                                           absl::string_view source);
  // Reads and parses the file at `path`. NOT_FOUND when it cannot be opened,
  // otherwise as Parse (SOURCE is the path).
  static absl::StatusOr<TuningTable> Load(const std::string& path);
  // The built-in table (kDefaultTuningTable, parsed once).
  static const TuningTable& Default();

  AllreduceAlgorithm Choose(int world, uint64_t bytes) const;
  // Rules in lookup order: by world (exact sizes ascending, '*' last), then
  // by max_bytes.
  const std::vector<Rule>& rules() const { return rules_; }
  // The table in the file format (Parse(ToString()) gives an equal table).
  std::string ToString() const;

 private:
  std::vector<Rule> rules_;
};

// The built-in table, in the file format; its comments give the reasons
// (the alpha-beta cost model of the design document, "Cost model").
extern const char kDefaultTuningTable[];

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_SPEC_TUNING_TABLE_H_
