// The job table's retention (JobRetention in job_table.h): how many ended
// jobs and events per job it keeps, and the store's history limit.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "server/coordinator/job_table.h"

namespace gradsync {

bool JobTable::RoomForEvent(JobEntry* e) {
  if (e->events.size() < retention_.max_events_per_job) return true;
  if (e->dropped_events++ == 0) {
    spdlog::warn(
        "[job {}] more than {} events: later epoch and stall events "
        "are not recorded",
        e->job.id(), retention_.max_events_per_job);
  }
  return false;
}

void JobTable::PruneEnded() {
  const size_t keep = std::max<size_t>(1, retention_.max_ended_jobs);
  if (ended_.size() > keep) {
    const size_t n = ended_.size() - keep;
    std::vector<std::string> gone(ended_.begin(), ended_.begin() + n);
    ended_.erase(ended_.begin(), ended_.begin() + n);
    std::sort(gone.begin(), gone.end());
    auto forgotten = [&gone](const std::string& id) {
      return std::binary_search(gone.begin(), gone.end(), id);
    };
    for (const std::string& id : gone) jobs_.erase(id);
    job_order_.erase(std::remove_if(job_order_.begin(), job_order_.end(), forgotten),
                     job_order_.end());
    traced_.erase(std::remove_if(traced_.begin(), traced_.end(), forgotten),
                  traced_.end());
    store_needs_pruning_ = true;
  }
  if (store_ != nullptr && retention_.max_stored_jobs > 0 && store_needs_pruning_) {
    absl::Status st = store_->PruneEnded(retention_.max_stored_jobs);
    if (!st.ok()) spdlog::error("job history not pruned: {}", st.ToString());
    store_needs_pruning_ = false;
  }
}

}  // namespace gradsync
