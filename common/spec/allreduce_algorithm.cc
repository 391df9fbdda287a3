#include "common/spec/allreduce_algorithm.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gradsync {
namespace {

constexpr std::pair<AllreduceAlgorithm, absl::string_view> kNames[] = {
    {AllreduceAlgorithm::kAuto, "auto"},
    {AllreduceAlgorithm::kRing, "ring"},
    {AllreduceAlgorithm::kHalvingDoubling, "hd"},
    {AllreduceAlgorithm::kRecursiveDoubling, "rd"},
    {AllreduceAlgorithm::kHierarchical, "hier"}};

}  // namespace

absl::string_view AllreduceAlgorithmName(AllreduceAlgorithm algorithm) {
  for (const auto& [value, name] : kNames) {
    if (value == algorithm) return name;
  }
  return "unknown";
}

absl::StatusOr<AllreduceAlgorithm> ParseAllreduceAlgorithm(absl::string_view text) {
  if (text == kOldRecursiveDoublingName) return AllreduceAlgorithm::kRecursiveDoubling;
  std::string want;
  for (const auto& [value, name] : kNames) {
    if (text == name) return value;
    absl::StrAppend(&want, want.empty() ? "" : " or ", name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown algorithm '", text, "' (want ", want, ")"));
}

std::string OldAlgorithmSpellingNote(absl::string_view text) {
  if (text != kOldRecursiveDoublingName) return "";
  return "note: algorithm 'tree' is recursive doubling, now spelled 'rd'; 'tree' "
         "will name a real (pipelined) tree algorithm once it lands, so write 'rd'";
}

}  // namespace gradsync
