#include "common/spec/tuning_table.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/spec/job_limits.h"

namespace gradsync {

// Cost model (N ranks, K bytes, latency alpha, bandwidth B):
//   ring                 2(N-1)·alpha + 2(N-1)/N·K/B
//   halving-doubling     2·log2(N)·alpha + 2(N-1)/N·K/B
//   recursive doubling   log2(N)·(alpha + K/B)
// plus, for N not a power of two (p = largest power of two below N), a fold
// of the extra ranks in and out: alpha + K/B each way.
const char kDefaultTuningTable[] = R"(# gradsync built-in allreduce tuning table.
# WORLD MAX_BYTES ALGORITHM; first rule (ascending MAX_BYTES) that covers the
# message wins; exact world sizes before '*'; ring when none covers it.
#
# Assumed link: alpha ~ 50 us per message (gRPC over TCP), B ~ 1.25 GB/s
# (10 GbE), so alpha·B ~ 64 KiB: below that a message costs mostly latency.
#
# World of one: nothing is sent.
1   inf     ring
# N = 2: rd (recursive doubling) is one exchange (alpha + K/B), ring and hd two steps
# (2·alpha + K/B); the saved alpha is over 5% of the time up to ~18·alpha·B.
2   1MiB    rd
2   inf     ring
# N = 2^k >= 4: rd beats hd while K < k·alpha·B / (k - 2(N-1)/N), that is
# below 4, 2.4, 1.9, 1.6, 1.4 x alpha·B at N = 4, 8, 16, 32, 64: 64 KiB is
# at or under every crossover. hd beats ring by 2(N-1-log2 N)·alpha at any
# size; hd is kept while that gain is >= 5% of the ring's time, i.e. while
# K < 20·alpha·B·N(N-1-log2 N)/(N-1): about 1.7, 5.9, 15, 34, 74 MB at
# N = 4, 8, 16, 32, 64 (rounded down below). Above it the ring's
# neighbour-only traffic, which the model does not price, is worth more.
4   64KiB   rd
4   1536KiB hd
4   inf     ring
8   64KiB   rd
8   4MiB    hd
8   inf     ring
16  64KiB   rd
16  12MiB   hd
16  inf     ring
32  64KiB   rd
32  32MiB   hd
32  inf     ring
64  64KiB   rd
64  64MiB   hd
64  inf     ring
# Other world sizes (not powers of two, or over 64): rd with the fold,
# (log2 p + 2)(alpha + K/B), beats the ring below 0.6, 1.7, 2.6 x alpha·B at
# N = 3, 5, 6: 32 KiB is under all of them. hd with the fold pays 2·K/B more
# than the ring, which then wins at every size for small N; large
# non-power-of-two worlds are left to `gradsync bench --tune`.
*   32KiB   rd
*   inf     ring
)";

namespace {

constexpr uint64_t kInf = std::numeric_limits<uint64_t>::max();

absl::Status LineError(absl::string_view source, int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ":", line, ": ", what));
}

// Digits with an optional KiB / MiB / GiB suffix, or "inf".
absl::StatusOr<uint64_t> ParseBytes(absl::string_view text) {
  if (text == "inf") return kInf;
  uint64_t unit = 1;
  for (const auto& [suffix, u] :
       {std::pair<const char*, uint64_t>{"KiB", uint64_t{1} << 10},
        {"MiB", uint64_t{1} << 20},
        {"GiB", uint64_t{1} << 30}}) {
    if (absl::ConsumeSuffix(&text, suffix)) {
      unit = u;
      break;
    }
  }
  uint64_t v = 0;
  if (text.empty() || !std::all_of(text.begin(), text.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(text, &v) || v > kInf / unit) {
    return absl::InvalidArgumentError("bad MAX_BYTES");
  }
  return v * unit;
}

std::string BytesText(uint64_t b) {
  if (b == kInf) return "inf";
  for (const auto& [suffix, u] :
       {std::pair<const char*, uint64_t>{"GiB", uint64_t{1} << 30},
        {"MiB", uint64_t{1} << 20},
        {"KiB", uint64_t{1} << 10}}) {
    if (b >= u && b % u == 0) return absl::StrCat(b / u, suffix);
  }
  return absl::StrCat(b);
}

// One non-empty, comment-free line.
absl::StatusOr<TuningTable::Rule> ParseRule(absl::string_view line) {
  std::vector<absl::string_view> f =
      absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
  if (f.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("want 'WORLD MAX_BYTES ALGORITHM', got ", f.size(), " field(s)"));
  }
  TuningTable::Rule rule;
  if (f[0] != "*" && (!absl::SimpleAtoi(f[0], &rule.world) || rule.world < 1 ||
                      rule.world > kMaxWorkers)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "WORLD '", f[0], "' is not '*' or a size in [1, ", kMaxWorkers, "]"));
  }
  absl::StatusOr<uint64_t> bytes = ParseBytes(f[1]);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MAX_BYTES '", f[1],
                     "' is not digits with an optional KiB/MiB/GiB "
                     "suffix, or 'inf'"));
  }
  rule.max_bytes = *bytes;
  absl::StatusOr<AllreduceAlgorithm> algorithm = ParseAllreduceAlgorithm(f[2]);
  if (!algorithm.ok() || *algorithm == AllreduceAlgorithm::kAuto) {
    return absl::InvalidArgumentError(
        absl::StrCat("ALGORITHM '", f[2], "' is not ring, hd, rd or hier"));
  }
  rule.algorithm = *algorithm;
  return rule;
}

// Lookup order: exact worlds ascending, then '*' (world 0); by max_bytes.
bool Before(const TuningTable::Rule& a, const TuningTable::Rule& b) {
  const int wa = a.world == 0 ? std::numeric_limits<int>::max() : a.world;
  const int wb = b.world == 0 ? std::numeric_limits<int>::max() : b.world;
  return std::tie(wa, a.max_bytes) < std::tie(wb, b.max_bytes);
}

}  // namespace

absl::StatusOr<TuningTable> TuningTable::Parse(absl::string_view text,
                                               absl::string_view source) {
  TuningTable t;
  std::vector<int> lines;  // line of each rule, for duplicate errors
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = line.substr(0, line.find('#'));
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    absl::StatusOr<Rule> rule = ParseRule(line);
    if (!rule.ok()) return LineError(source, number, rule.status().message());
    for (size_t i = 0; i < t.rules_.size(); ++i) {
      if (t.rules_[i].world == rule->world && t.rules_[i].max_bytes == rule->max_bytes) {
        return LineError(source, number,
                         absl::StrCat("same WORLD and MAX_BYTES as line ", lines[i]));
      }
    }
    t.rules_.push_back(*rule);
    lines.push_back(number);
  }
  if (t.rules_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no rules (want lines 'WORLD MAX_BYTES ALGORITHM')"));
  }
  std::stable_sort(t.rules_.begin(), t.rules_.end(), Before);
  return t;
}

absl::StatusOr<TuningTable> TuningTable::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("tuning file ", path, ": cannot open: ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

const TuningTable& TuningTable::Default() {
  static const TuningTable* table =
      new TuningTable(*Parse(kDefaultTuningTable, "built-in tuning table"));
  return *table;
}

AllreduceAlgorithm TuningTable::Choose(int world, uint64_t bytes) const {
  for (int pass_world : {world, 0}) {
    for (const Rule& r : rules_) {
      if (r.world == pass_world && bytes <= r.max_bytes) return r.algorithm;
    }
  }
  return AllreduceAlgorithm::kRing;
}

std::string TuningTable::ToString() const {
  std::string out = "# WORLD MAX_BYTES ALGORITHM\n";
  for (const Rule& r : rules_) {
    absl::StrAppend(&out, r.world == 0 ? "*" : absl::StrCat(r.world), " ",
                    BytesText(r.max_bytes), " ", AllreduceAlgorithmName(r.algorithm),
                    "\n");
  }
  return out;
}

}  // namespace gradsync
