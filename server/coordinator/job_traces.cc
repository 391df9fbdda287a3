// The job table's timelines (spec.trace, see job_table.h): kept with the
// result of the newest traced jobs only, so coordinator memory stays bounded.
#include <utility>

#include "server/coordinator/job_table.h"

namespace gradsync {
namespace {

// Keeps the first events of `t` that fit in `max_bytes` (and at most
// kMaxTraceEventsPerRank), counting the rest as dropped.
void TruncateTrace(v1::WorkerTrace* t, size_t max_bytes) {
  size_t bytes = 0;
  int keep = 0;
  for (; keep < t->events_size() && keep < JobTable::kMaxTraceEventsPerRank; ++keep) {
    const size_t n = t->events(keep).ByteSizeLong() + 8;  // + tag and length
    if (bytes + n > max_bytes) break;
    bytes += n;
  }
  const int extra = t->events_size() - keep;
  if (extra > 0) {
    t->mutable_events()->DeleteSubrange(keep, extra);
    t->set_dropped(t->dropped() + extra);
  }
}

}  // namespace

void JobTable::KeepTraces(JobEntry* e) {
  if (!e->job.spec().trace()) return;
  v1::JobResult* res = e->job.mutable_result();
  res->clear_traces();
  for (size_t r = 0; r < e->results.size(); ++r) {
    v1::WorkerTrace* t = res->add_traces();
    t->Swap(e->results[r].mutable_trace());  // the JobDone keeps none
    t->set_rank(static_cast<int>(r));
    if (static_cast<int>(r) < e->job.workers_size()) {
      t->set_worker_id(e->job.workers(static_cast<int>(r)));
    }
    TruncateTrace(t, kMaxTraceBytesPerJob / e->results.size());
  }
  // An elastic job's ranks traced the last generation; the coordinator's
  // lane shows every generation and re-formation.
  if (e->job.spec().elastic()) *res->add_traces() = GenerationsTrace(e->job);
  traced_.push_back(e->job.id());
  while (traced_.size() > kMaxTracedJobs) {
    auto it = jobs_.find(traced_.front());
    if (it != jobs_.end()) it->second.job.mutable_result()->clear_traces();
    traced_.pop_front();
  }
}

}  // namespace gradsync
