#include "server/coordinator/straggler_watch.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace gradsync {

void StragglerWatch::Start(int world) {
  ranks_.assign(world < 0 ? 0 : world, RankState{});
  named_ = -1;
}

std::string StragglerWatch::Add(int rank, int64_t step, double compute_seconds) {
  if (rank < 0 || rank >= static_cast<int>(ranks_.size())) return "";
  RankState& r = ranks_[rank];
  if (r.step < 0 || step < r.step || compute_seconds < r.compute) {
    r = RankState{step, compute_seconds, -1, 0};  // first report, or restarted
    return "";
  }
  if (step == r.step) return "";
  r.seconds_per_step = (compute_seconds - r.compute) / static_cast<double>(step - r.step);
  r.step = step;
  r.compute = compute_seconds;
  const Lag lag = LagOf(Rates(), rank);
  if (lag.rank < 0 || lag.ratio < rule_.ratio) {
    r.behind = 0;
    if (named_ == rank) named_ = -1;  // recovered
    return "";
  }
  if (++r.behind < rule_.reports || named_ == rank) return "";
  named_ = rank;
  return absl::StrFormat(
      "straggler: rank %d computes %.1fx the other ranks' median per step "
      "(%.1f ms against %.1f ms, %d reports in a row)",
      rank, lag.ratio, 1e3 * lag.seconds_per_step, 1e3 * lag.others_median, r.behind);
}

std::vector<double> StragglerWatch::Rates() const {
  std::vector<double> rates;
  rates.reserve(ranks_.size());
  for (const RankState& r : ranks_) rates.push_back(r.seconds_per_step);
  return rates;
}

StragglerWatch::Lag StragglerWatch::LagOf(const std::vector<double>& rates, int rank) {
  Lag lag;
  const double own = rates[rank];
  if (own < 0) return lag;
  std::vector<double> others;
  for (int i = 0; i < static_cast<int>(rates.size()); ++i) {
    if (i != rank && rates[i] >= 0) others.push_back(rates[i]);
  }
  if (others.empty()) return lag;
  std::sort(others.begin(), others.end());
  const size_t m = others.size();
  const double median =
      m % 2 == 1 ? others[m / 2] : (others[m / 2 - 1] + others[m / 2]) / 2;
  lag.rank = rank;
  lag.seconds_per_step = own;
  lag.others_median = median;
  // A rank that took no measurable time per step is behind no one; one that
  // did, beside others that did not, is as far behind as can be said.
  lag.ratio = median > 0 ? own / median : (own > 0 ? 1e9 : 1.0);
  return lag;
}

StragglerWatch::Lag StragglerWatch::Slowest() const { return SlowestOf(Rates()); }

StragglerWatch::Lag StragglerWatch::SlowestOf(const std::vector<double>& rates) {
  Lag slowest;
  for (int i = 0; i < static_cast<int>(rates.size()); ++i) {
    const Lag lag = LagOf(rates, i);
    if (lag.rank >= 0 &&
        (slowest.rank < 0 || lag.seconds_per_step > slowest.seconds_per_step)) {
      slowest = lag;
    }
  }
  return slowest;
}

}  // namespace gradsync
