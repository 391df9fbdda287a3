#include "common/spec/model_spec.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace gradsync {
namespace {

constexpr char kPrefix[] = "mlp:";
constexpr int kMaxWidth = kMaxModelWidth;

}  // namespace

std::string MlpSpec::ToString() const {
  return absl::StrCat(kPrefix, absl::StrJoin(widths, "-"));
}

absl::StatusOr<MlpSpec> ParseModelSpec(const std::string& text) {
  const std::string prefix = kPrefix;
  if (text.compare(0, prefix.size(), prefix) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("model: unknown model \"", text,
                                                   "\" (want e.g. mlp:784-256-128-10)"));
  }
  MlpSpec spec;
  for (absl::string_view piece :
       absl::StrSplit(absl::string_view(text).substr(prefix.size()), '-')) {
    // Strict digits only: absl::SimpleAtoi would accept signs and spaces.
    const bool digits = !piece.empty() && piece.size() <= 8 &&
                        std::all_of(piece.begin(), piece.end(),
                                    [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      return absl::InvalidArgumentError(
          absl::StrCat("model: width \"", piece, "\" in \"", text, "\" is not a number"));
    }
    int w = 0;
    for (char c : piece) w = w * 10 + (c - '0');
    if (w < 1 || w > kMaxWidth) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model: width ", w, " in \"", text, "\" is outside [1, ", kMaxWidth, "]"));
    }
    spec.widths.push_back(w);
  }
  if (spec.widths.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model: \"", text, "\" needs at least an input and an output width"));
  }
  return spec;
}

size_t NumParams(const MlpSpec& spec) {
  size_t total = 0;
  for (size_t l = 0; l + 1 < spec.widths.size(); ++l) {
    const size_t in = static_cast<size_t>(spec.widths[l]);
    const size_t out = static_cast<size_t>(spec.widths[l + 1]);
    total += out * in + out;
  }
  return total;
}

}  // namespace gradsync
