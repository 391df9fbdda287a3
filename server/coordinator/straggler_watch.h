// Names a running job's slow rank from its ranks' progress reports.
//
// Each Progress report carries the rank's steps so far and its cumulative
// compute seconds (forward and backward, not waiting for communication), so
// a report interval gives the rank's compute seconds per step, whatever the
// strategy: in a synchronous job the fast ranks wait in communication for the
// slow one, and only its compute shows it. A rank is a straggler when its
// compute per step is at least `ratio` times the median of the other ranks'
// in `reports` of its reports in a row; Add returns the line that names it
// (once, and again only after it recovered and fell behind anew).
#ifndef GRADSYNC_SERVER_COORDINATOR_STRAGGLER_WATCH_H_
#define GRADSYNC_SERVER_COORDINATOR_STRAGGLER_WATCH_H_

#include <cstdint>
#include <string>
#include <vector>

namespace gradsync {

class StragglerWatch {
 public:
  struct Rule {
    double ratio = 1.5;  // compute per step against the others' median
    int reports = 3;     // in a row
  };
  // One rank against the others' median (compute seconds per step).
  struct Lag {
    int rank = -1;  // -1: fewer than two ranks have reported a rate
    double seconds_per_step = 0;
    double others_median = 0;
    double ratio = 0;  // seconds_per_step / others_median
  };

  StragglerWatch() = default;
  explicit StragglerWatch(Rule rule) : rule_(rule) {}

  // A job placed on `world` ranks (forgets what was seen before).
  void Start(int world);

  // Rank `rank` reported `step` steps and `compute_seconds` of compute so
  // far. Returns the line naming it when this report makes it a straggler by
  // the rule, else "". Reports without new steps, out-of-range ranks and
  // counters that went backwards (a new generation) only reset that rank.
  std::string Add(int rank, int64_t step, double compute_seconds);

  // The rank with the most compute per step over its latest interval.
  Lag Slowest() const;
  // The same over given rates (seconds per step, rank order; < 0: none),
  // e.g. each rank's whole run at the job's end.
  static Lag SlowestOf(const std::vector<double>& seconds_per_step);
  // The rank named last and not recovered since, or -1.
  int straggler() const { return named_; }

 private:
  struct RankState {
    int64_t step = -1;  // at the last report; -1: none
    double compute = 0;
    double seconds_per_step = -1;  // latest interval; < 0: none yet
    int behind = 0;                // reports in a row past the rule's ratio
  };
  static Lag LagOf(const std::vector<double>& seconds_per_step, int rank);
  std::vector<double> Rates() const;

  Rule rule_;
  std::vector<RankState> ranks_;
  int named_ = -1;
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_STRAGGLER_WATCH_H_
