// The job table's timelines (spec.trace, see job_table.h): kept with the
// result of the newest traced jobs only, so coordinator memory stays bounded.
#include <utility>

#include "server/coordinator/job_table.h"

namespace gradsync {

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
    const int extra = t->events_size() - kMaxTraceEventsPerRank;
    if (extra > 0) {
      t->mutable_events()->DeleteSubrange(kMaxTraceEventsPerRank, extra);
      t->set_dropped(t->dropped() + extra);
    }
  }
  traced_.push_back(e->job.id());
  while (traced_.size() > kMaxTracedJobs) {
    auto it = jobs_.find(traced_.front());
    if (it != jobs_.end()) it->second.job.mutable_result()->clear_traces();
    traced_.pop_front();
  }
}

}  // namespace gradsync
