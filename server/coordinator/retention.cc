#include "server/coordinator/retention.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace gradsync {
namespace {

// Keeps the first events of `t` that fit in `max_bytes` (and at most
// kMaxTraceEventsPerRank), counting the rest as dropped.
void TruncateTrace(v1::WorkerTrace* t, size_t max_bytes) {
  size_t bytes = 0;
  int keep = 0;
  for (; keep < t->events_size() && keep < Retention::kMaxTraceEventsPerRank; ++keep) {
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

bool Retention::RoomForEvent(JobEntry* e) {
  if (e->events.size() < limits_.max_events_per_job) return true;
  if (e->dropped_events++ == 0) {
    spdlog::warn(
        "[job {}] more than {} events: later epoch and stall events "
        "are not recorded",
        e->job.id(), limits_.max_events_per_job);
  }
  return false;
}

void Retention::Ended(const std::string& id) {
  ended_.push_back(id);
  history_needs_pruning_ = true;
  if (ended_.size() <= kMaxCurveJobs) return;
  auto old = jobs_->find(ended_[ended_.size() - 1 - kMaxCurveJobs]);
  if (old != jobs_->end()) old->second.curves.Clear();
}

void Retention::KeepTraces(JobEntry* e, const v1::WorkerTrace* coordinator_lane) {
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
  if (coordinator_lane != nullptr) *res->add_traces() = *coordinator_lane;
  traced_.push_back(e->job.id());
  while (traced_.size() > kMaxTracedJobs) {
    auto it = jobs_->find(traced_.front());
    if (it != jobs_->end()) it->second.job.mutable_result()->clear_traces();
    traced_.pop_front();
  }
}

void Retention::PruneEnded(std::vector<std::string>* order) {
  const size_t keep = std::max<size_t>(1, limits_.max_ended_jobs);
  if (ended_.size() > keep) {
    const size_t n = ended_.size() - keep;
    std::vector<std::string> gone(ended_.begin(), ended_.begin() + n);
    ended_.erase(ended_.begin(), ended_.begin() + n);
    std::sort(gone.begin(), gone.end());
    auto forgotten = [&gone](const std::string& id) {
      return std::binary_search(gone.begin(), gone.end(), id);
    };
    for (const std::string& id : gone) jobs_->erase(id);
    order->erase(std::remove_if(order->begin(), order->end(), forgotten), order->end());
    traced_.erase(std::remove_if(traced_.begin(), traced_.end(), forgotten),
                  traced_.end());
    history_needs_pruning_ = true;
  }
  if (history_needs_pruning_ && history_->enabled()) {
    history_->PruneEnded(limits_.max_stored_jobs);
  }
  history_needs_pruning_ = false;
}

}  // namespace gradsync
