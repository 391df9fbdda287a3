// What the dashboard draws of a job (server/coordinator/dashboard_server.h):
// its loss, throughput and communication share against step and wall time,
// its test accuracy per epoch, and each rank's latest progress.
//
// Memory is bounded whatever a job's length: a DownsampledSeries keeps at
// most `capacity` points of an unbounded stream, evenly spread over it. When
// it is full it drops every other point and from then on keeps only every
// second offered point (the stride doubles), so a job of any length keeps
// between capacity/2 and capacity points from its first report to its
// latest, plus the latest report itself. Rank 0 reports every 0.5 s: a one-
// hour job keeps one point per ~28 s at kCurvePoints.
//
// Plain data: no locking; the job table owns one JobCurves per job and is
// called under the coordinator's mutex.
#ifndef GRADSYNC_SERVER_COORDINATOR_JOB_CURVES_H_
#define GRADSYNC_SERVER_COORDINATOR_JOB_CURVES_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

// Points kept per job and series (progress; accuracy).
inline constexpr size_t kCurvePoints = 256;

// One report of rank 0, with the job's throughput then.
struct CurvePoint {
  int64_t time_ms = 0;  // unix ms, coordinator clock
  int64_t step = 0;
  int32_t epoch = 0;
  double loss = 0;                // rank 0's mean since its previous report
  double samples_per_second = 0;  // the whole job (sum over ranks)
  // Rank 0's communication threads' busy time and compute time per step
  // since its previous report (cumulative seconds differenced).
  double comm_ms_per_step = 0;
  double compute_ms_per_step = 0;
};

// One finished epoch (every rank reported it).
struct AccuracyPoint {
  int64_t time_ms = 0;
  // Rank 0's latest reported step when the epoch completed (up to one
  // report, 0.5 s, behind; the page places the point by time_ms on the
  // progress curve instead).
  int64_t step = 0;
  int32_t epoch = 0;
  double train_loss = 0;
  double test_accuracy = 0;  // rank 0's parameters on the test set
};

// One rank's latest Progress.
struct RankProgress {
  int64_t updated_ms = 0;  // 0: no report yet
  int64_t step = 0;
  int32_t epoch = 0;
  double loss = 0;
  double samples_per_second = 0;
  double comm_seconds = 0;  // cumulative
  double compute_seconds = 0;
};

// At most `capacity` (>= 2) points of a stream, evenly spread (see top).
template <typename T>
class DownsampledSeries {
 public:
  explicit DownsampledSeries(size_t capacity = kCurvePoints)
      : capacity_(capacity < 2 ? 2 : capacity) {}

  void Add(const T& p) {
    if (offered_++ % stride_ == 0) {
      if (kept_.size() == capacity_) Halve();
      if (kept_.size() == kept_.capacity()) {
        kept_.reserve(std::min(capacity_, std::max<size_t>(8, 2 * kept_.size())));
      }
      kept_.push_back(p);
      latest_is_kept_ = true;
    } else {
      latest_is_kept_ = false;
    }
    latest_ = p;
  }

  // The kept points, then the latest one if it was not kept: at most
  // capacity + 1, in the order offered.
  std::vector<T> Points() const {
    std::vector<T> out = kept_;
    if (offered_ > 0 && !latest_is_kept_) out.push_back(latest_);
    return out;
  }

  // The latest point offered (a default T before the first).
  const T& Latest() const { return latest_; }

  // Frees every point (an old ended job's curves, see JobTable).
  void Clear() {
    std::vector<T>().swap(kept_);
    offered_ = 0;
    stride_ = 1;
    latest_is_kept_ = false;
  }

  size_t kept() const { return kept_.size(); }
  size_t capacity() const { return capacity_; }
  // Bytes the kept points occupy (the vector never grows past capacity).
  size_t bytes() const { return kept_.capacity() * sizeof(T); }
  int64_t stride() const { return stride_; }
  int64_t offered() const { return offered_; }

 private:
  // Keeps kept_[0], kept_[2], ...: the points whose offered index is a
  // multiple of 2 * stride_, which becomes the new stride.
  void Halve() {
    size_t n = 0;
    for (size_t i = 0; i < kept_.size(); i += 2) kept_[n++] = kept_[i];
    kept_.resize(n);
    stride_ *= 2;
  }

  size_t capacity_;
  std::vector<T> kept_;
  T latest_{};
  bool latest_is_kept_ = false;
  int64_t offered_ = 0;
  int64_t stride_ = 1;
};

// A job's curves and its ranks' latest progress.
class JobCurves {
 public:
  explicit JobCurves(size_t capacity = kCurvePoints)
      : progress_(capacity), accuracy_(capacity) {}

  // Sizes the per-rank table (the job was placed on `world` ranks).
  void Start(int world) { ranks_.assign(world < 0 ? 0 : world, RankProgress{}); }

  // Rank p.rank()'s report at `now_ms`; on rank 0, when it completed new
  // steps, also a curve point, with `job_samples_per_second` the sum over
  // ranks. Out-of-range ranks are ignored.
  void AddProgress(const v1::WorkerMessage::Progress& p, double job_samples_per_second,
                   int64_t now_ms);

  // A finished epoch (`step`: the job's latest step).
  void AddEpoch(const v1::EpochResult& epoch, int64_t step, int64_t now_ms);

  // Frees the curves (the per-rank table stays).
  void Clear() {
    progress_.Clear();
    accuracy_.Clear();
  }

  const DownsampledSeries<CurvePoint>& progress() const { return progress_; }
  const DownsampledSeries<AccuracyPoint>& accuracy() const { return accuracy_; }
  const std::vector<RankProgress>& ranks() const { return ranks_; }

 private:
  DownsampledSeries<CurvePoint> progress_;
  DownsampledSeries<AccuracyPoint> accuracy_;
  std::vector<RankProgress> ranks_;
};

// A job as the dashboard shows it: a copy taken under the coordinator's
// mutex (traces left out).
struct JobLive {
  v1::Job job;
  std::vector<CurvePoint> curve;
  std::vector<AccuracyPoint> accuracy;
  int64_t curve_stride = 1;  // reports per kept point
  std::vector<RankProgress> ranks;
  std::vector<std::string> rank_hosts;   // peer address per rank, when known
  std::vector<std::string> rank_stalls;  // latest stall report per rank, or ""
};

// What the dashboard's overview shows: every job with its latest curve point
// only (JobLive::curve has at most one), the live workers and the shards.
struct ClusterLive {
  int64_t now_ms = 0;
  std::vector<JobLive> jobs;
  std::vector<v1::WorkerInfo> workers;
  int32_t ps_shards = 0;
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_JOB_CURVES_H_
