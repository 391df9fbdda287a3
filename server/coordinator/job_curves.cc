#include "server/coordinator/job_curves.h"

namespace gradsync {

// Per-step times come from the difference to rank 0's previous report, so a
// curve point shows what the last interval cost rather than the average
// since the start.
void JobCurves::AddProgress(const v1::WorkerMessage::Progress& p,
                            double job_samples_per_second, int64_t now_ms) {
  if (p.rank() < 0 || static_cast<size_t>(p.rank()) >= ranks_.size()) return;
  RankProgress& r = ranks_[p.rank()];
  const RankProgress before = r;
  r.updated_ms = now_ms;
  r.step = p.step();
  r.epoch = p.epoch();
  r.loss = p.loss();
  r.samples_per_second = p.samples_per_second();
  r.comm_seconds = p.comm_seconds();
  r.compute_seconds = p.compute_seconds();
  // A report without a new step (the first one, at step 0, carries the
  // initial checksum) has no loss or time per step to draw.
  if (p.rank() != 0 || p.step() <= before.step) return;
  CurvePoint c;
  c.time_ms = now_ms;
  c.step = p.step();
  c.epoch = p.epoch();
  c.loss = p.loss();
  c.samples_per_second = job_samples_per_second;
  const double steps = static_cast<double>(p.step() - before.step);
  c.comm_ms_per_step = 1e3 * (p.comm_seconds() - before.comm_seconds) / steps;
  c.compute_ms_per_step = 1e3 * (p.compute_seconds() - before.compute_seconds) / steps;
  progress_.Add(c);
}

void JobCurves::AddEpoch(const v1::EpochResult& epoch, int64_t step, int64_t now_ms) {
  AccuracyPoint a;
  a.time_ms = now_ms;
  a.step = step;
  a.epoch = epoch.epoch();
  a.train_loss = epoch.train_loss();
  a.test_accuracy = epoch.test_accuracy();
  accuracy_.Add(a);
}

}  // namespace gradsync
