// The job table's recovery after a coordinator restart (see job_table.h):
// what it does with each job its history (job_history.h) gives back.
#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/spec/job_spec.h"
#include "server/coordinator/job_table.h"

namespace gradsync {

absl::Status JobTable::Recover(Decisions* out) {
  if (!history_.enabled()) return absl::OkStatus();
  absl::StatusOr<std::vector<StoredJob>> stored = history_.LoadAll();
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
  next_job_ = std::max(next_job_, JobHistory::IdNumber(id) + 1);
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
    retention_.Restored(id);  // an ended job is history only
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
  queue_.Push(e->job.id());
}

}  // namespace gradsync
