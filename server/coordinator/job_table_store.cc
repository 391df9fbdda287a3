// The job table's history (see job_table.h): saving jobs to the JobStore
// and recovering them after a coordinator restart.
#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/spec/job_spec.h"
#include "server/coordinator/job_table.h"

namespace gradsync {
namespace {

// n of a job id "j-<prefix><n>" (the digits after the last '-'); 0 when the
// id does not end so.
int64_t IdNumber(const std::string& id) {
  const size_t dash = id.rfind('-');
  int64_t n = 0;
  if (dash == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(id).substr(dash + 1), &n)) {
    return 0;
  }
  return n;
}

}  // namespace

absl::Status JobTable::Save(JobEntry* e) {
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

absl::Status JobTable::Recover(Decisions* out) {
  if (store_ == nullptr) return absl::OkStatus();
  absl::StatusOr<std::vector<StoredJob>> stored = store_->LoadAll();
  if (!stored.ok()) return stored.status();
  for (StoredJob& s : *stored) Restore(std::move(s), out);
  PruneEnded();
  spdlog::info("job history: {} job(s) recovered, {} queued, next id n={}",
               stored->size(), queue_.size(), next_job_);
  return absl::OkStatus();
}

void JobTable::Restore(StoredJob stored, Decisions* out) {
  const std::string id = stored.job.id();
  if (id.empty() || jobs_.count(id) > 0) {
    spdlog::warn(
        "job history: skipping a stored job with id '{}' (empty or "
        "repeated)",
        id);
    return;
  }
  next_job_ = std::max(next_job_, IdNumber(id) + 1);
  JobEntry& e = jobs_[id];
  e.job = std::move(stored.job);
  e.events = std::move(stored.events);
  e.saved_events = e.events.size();
  e.queued = absl::FromUnixMillis(e.job.submit_time_ms());
  job_order_.push_back(id);
  if (e.job.state() == v1::QUEUED) {
    RequeueRestored(&e, out);
  } else if (e.job.state() == v1::RUNNING) {
    // Not resumed automatically: a ps-sync job with checkpoint_every is
    // resumed by submitting a job with resume_from = this id (`gradsync
    // submit --resume`), once its PS shards are back (docs/operations.md,
    // Checkpoints and resume).
    const int n = e.job.workers_size();
    e.done.assign(n, false);
    e.results.assign(n, {});
    e.rank_wall.assign(n, 0);
    e.init_checksums.assign(n, "");
    e.rank_samples_per_second.assign(n, 0);
    EndJob(&e, v1::FAILED, absl::UnavailableError(kCoordinatorRestarted), out);
  } else {
    ended_.push_back(id);  // an ended job is history only
  }
}

void JobTable::RequeueRestored(JobEntry* e, Decisions* out) {
  // The server may have restarted with fewer PS shards (or a stricter
  // validator): the spec is checked again, not trusted.
  absl::StatusOr<v1::JobSpec> spec = ValidateJobSpec(e->job.spec(), num_ps_shards());
  absl::StatusOr<MlpSpec> model =
      !spec.ok() ? absl::StatusOr<MlpSpec>(spec.status()) : MlpOf(*spec);
  if (!model.ok()) {
    EndJob(
        e, v1::FAILED,
        absl::Status(model.status().code(), absl::StrCat("after a coordinator restart: ",
                                                         model.status().message())),
        out);
    return;
  }
  e->model = *std::move(model);
  queue_.push_back(e->job.id());
}

}  // namespace gradsync
