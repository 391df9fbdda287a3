#include "server/coordinator/job_history.h"

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace gradsync {

absl::Status JobHistory::Save(JobEntry* e) {
  if (store_ == nullptr) {
    e->saved_events = e->events.size();
    return absl::OkStatus();
  }
  const absl::Span<const v1::JobEvent> unsaved =
      absl::MakeConstSpan(e->events).subspan(e->saved_events);
  absl::Status st;
  if (e->job.result().traces_size() == 0) {
    st = store_->Save(e->job, unsaved);
  } else {  // timelines stay out of the history (they can be megabytes)
    v1::Job job = e->job;
    job.mutable_result()->clear_traces();
    st = store_->Save(job, unsaved);
  }
  if (!st.ok()) {
    spdlog::error("[job {}] not saved to the job history: {}", e->job.id(),
                  st.ToString());
    return st;
  }
  e->saved_events = e->events.size();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<StoredJob>> JobHistory::LoadAll() {
  if (store_ == nullptr) return std::vector<StoredJob>{};
  return store_->LoadAll();
}

void JobHistory::PruneEnded(size_t max_stored) {
  if (store_ == nullptr || max_stored == 0) return;
  absl::Status st = store_->PruneEnded(max_stored);
  if (!st.ok()) spdlog::error("job history not pruned: {}", st.ToString());
}

int64_t JobHistory::IdNumber(const std::string& id) {
  const size_t dash = id.rfind('-');
  int64_t n = 0;
  if (dash == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(id).substr(dash + 1), &n)) {
    return 0;
  }
  return n;
}

}  // namespace gradsync
