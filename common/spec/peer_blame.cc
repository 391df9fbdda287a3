#include "common/spec/peer_blame.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gradsync {
namespace {

constexpr absl::string_view kCannotReach = " cannot reach rank ";
constexpr absl::string_view kNoData = ": no data from rank ";

}  // namespace

std::string CannotReachPeerText(int rank, int peer) {
  return absl::StrCat("rank ", rank, kCannotReach, peer);
}

std::string NoDataFromPeerText(int rank, int peer) {
  return absl::StrCat("rank ", rank, kNoData, peer);
}

int BlamedPeerRank(absl::string_view error) {
  size_t best = absl::string_view::npos, skip = 0;
  for (absl::string_view form : {kCannotReach, kNoData}) {
    const size_t at = error.find(form);
    if (at < best) {
      best = at;
      skip = form.size();
    }
  }
  if (best == absl::string_view::npos) return -1;
  absl::string_view rest = error.substr(best + skip);
  size_t digits = 0;
  while (digits < rest.size() && absl::ascii_isdigit(rest[digits])) ++digits;
  int peer = -1;
  if (digits == 0 || digits > 9 || !absl::SimpleAtoi(rest.substr(0, digits), &peer)) {
    return -1;
  }
  return peer;
}

}  // namespace gradsync
