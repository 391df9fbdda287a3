// The job table's elastic jobs (see job_table.h, JobSpec.elastic and
// docs/operations.md "Elastic jobs"): a lost rank ends a generation; the
// job, still RUNNING, waits for its survivors to stop and is placed again on
// min(workers, idle) >= min_workers workers as the next generation, which
// resumes from the newest committed generation's checkpoint. Each
// generation has its own data-plane id and secret (GenerationJobId), so the
// ranks of an ended one are fenced: their PS calls, peer frames and reports
// are refused or ignored.
#include <algorithm>
#include <cmath>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/spec/job_spec.h"
#include "server/coordinator/job_table.h"

namespace gradsync {

void JobTable::Reform(JobEntry* e, const std::string& why, const std::string& lost_worker,
                      int lost_rank, Decisions* out) {
  const std::string& id = e->job.id();
  const int gen = e->job.generation();
  Generations generations(&e->job);
  generations.End(why, lost_worker, lost_rank, NowMs());
  // A member blamed while alive (a peer could not reach it) is left out
  // of later generations while this registration of it lasts; a lost
  // (dead) one comes back only by registering again anyway. (Before the
  // entry is cleared below: `lost_worker` may be its pending_blamed_worker.)
  if (const RegisteredWorker* w =
          lost_worker.empty() ? nullptr : workers_->Find(lost_worker);
      w != nullptr && !w->dead) {
    e->left_out[w->id] = w->order;
  }
  if (gen + 1 >= kMaxGenerations) {
    EndJob(e, v1::FAILED,
           absl::UnavailableError(absl::StrCat("elastic job gave up after ", gen + 1,
                                               " generations; the last ended because ",
                                               why)),
           out);
    return;
  }
  const int without = generations.WithoutProgressInARow();
  if (without >= kMaxGenerationsWithoutProgress) {
    EndJob(e, v1::FAILED,
           absl::UnavailableError(absl::StrCat(
               "elastic job: ", without,
               " generations in a row ended without training a step; the last because ",
               why)),
           out);
    return;
  }
  // Fence the ended generation: its live ranks stop, its PS slices end (a
  // rank that wakes up later finds them gone), and its reports no longer
  // match (RankEntry compares generations).
  StopGeneration(e, absl::StrCat("generation ", gen, " of job ", id, " ended: ", why),
                 /*end_on_shards=*/true, out);
  spdlog::warn("[job {}] generation {} ended at step {}: {}; re-forming", id, gen,
               e->job.step(), why);
  e->job.set_generation(gen + 1);
  e->job.clear_workers();
  e->job.clear_stalls();
  e->done.clear();
  e->results.clear();
  e->rank_wall.clear();
  e->init_checksums.clear();
  e->rank_samples_per_second.clear();
  e->epochs.clear();
  e->stalls.clear();
  e->pending_error = absl::OkStatus();
  e->pending_blamed_worker.clear();
  e->pending_blamed_rank = -1;
  e->reforming = true;
  e->reform_since = env_->Now();
  reforming_.push_back(id);
  AddStateEvent(e,
                absl::StrCat("generation ", gen, " ended at step ", e->job.step(), ": ",
                             why, "; re-forming as generation ", gen + 1),
                out);
}

bool JobTable::PlaceReforming(Decisions* out) {
  bool waiting = false;
  for (auto it = reforming_.begin(); it != reforming_.end();) {
    JobEntry* e = Entry(*it);
    if (e == nullptr || e->job.state() != v1::RUNNING || !e->reforming) {
      it = reforming_.erase(it);
      continue;
    }
    const v1::JobSpec& spec = e->job.spec();
    const int gen = e->job.generation();
    const std::string old_id = GenerationJobId(e->job.id(), gen - 1);
    const std::vector<const RegisteredWorker*> live = workers_->Live();
    const auto left_out = [e](const RegisteredWorker& w) {
      const auto it = e->left_out.find(w.id);
      return it != e->left_out.end() && it->second == w.order;
    };
    int idle = 0, stopping = 0, idle_left_out = 0;
    for (const RegisteredWorker* w : live) {
      if (w->job_id.empty()) ++idle;
      if (w->job_id.empty() && left_out(*w)) ++idle_left_out;
      if (w->job_id == old_id) ++stopping;
    }
    // Enough idle workers for the whole job (spares): go now. Else wait a
    // moment for the survivors, which were cancelled, to become idle.
    // Not counting the members a failed generation blamed.
    const int usable = idle - idle_left_out;
    const bool survivors_pending = stopping > 0 && usable < spec.workers() &&
                                   env_->Now() - e->reform_since < kSurvivorWait;
    // Without the blamed members, if the others suffice.
    const bool leave_out = idle_left_out > 0 && usable >= spec.min_workers();
    const int n = std::min(spec.workers(), leave_out ? usable : idle);
    if (!survivors_pending && n >= spec.min_workers()) {
      std::vector<const RegisteredWorker*> picked =
          leave_out ? workers_->PickIdle(n, left_out) : workers_->PickIdle(n);
      if (static_cast<int>(picked.size()) == n) {
        it = reforming_.erase(it);
        Place(e, picked, out);
        continue;
      }
    }
    const std::string text =
        survivors_pending
            ? absl::StrCat("re-forming generation ", gen, ": waiting for ", stopping,
                           " rank(s) of generation ", gen - 1, " to stop")
            : absl::StrCat("re-forming generation ", gen, ": needs at least ",
                           spec.min_workers(), " of ", spec.workers(), " workers, ",
                           live.size(), " registered, ", idle, " idle");
    if (text != e->job.waiting_for()) {
      e->job.set_waiting_for(text);
      if (retention_.RoomForEvent(e)) AppendStateEvent(e, text, out);
    }
    waiting = true;
    ++it;
  }
  return waiting;
}

void JobTable::ExpireReforming(Decisions* out) {
  if (reforming_.empty()) return;
  const absl::Time now = env_->Now();
  const std::vector<std::string> ids(reforming_.begin(), reforming_.end());
  for (const std::string& id : ids) {
    JobEntry* e = Entry(id);
    if (e == nullptr || e->job.state() != v1::RUNNING || !e->reforming) continue;
    const absl::Duration wait = absl::Milliseconds(e->job.spec().elastic_wait_ms());
    if (now - e->reform_since < wait) continue;
    const v1::JobGeneration* last =
        e->job.generations_size() > 0 ? &e->job.generations(e->job.generations_size() - 1)
                                      : nullptr;
    EndJob(
        e, v1::FAILED,
        absl::UnavailableError(absl::StrCat(
            "elastic job: generation ", e->job.generation(), " could not start within ",
            absl::FormatDuration(wait), " (", e->job.waiting_for(), ")",
            last == nullptr ? ""
                            : absl::StrCat("; generation ", last->generation(),
                                           " ended because ", last->ended_because()))),
        out);
  }
  // Survivors that did not stop within kSurvivorWait no longer hold a
  // re-formation back.
  Reschedule(out);
}

void JobTable::GenerationReported(JobEntry* e, const v1::WorkerMessage::Progress& p) {
  const std::string text = Generations(&e->job).Commit(
      p.step(), absl::ToDoubleSeconds(env_->Now() - e->reform_since));
  if (text.empty()) return;
  spdlog::info("[job {}] {}", e->job.id(), text);
  if (retention_.RoomForEvent(e)) {
    Decisions ignored;  // the caller's progress update wakes watchers
    AppendStateEvent(e, text, &ignored);
  }
  Save(e).IgnoreError();  // logged by Save
}

void JobTable::EndedGenerationDone(const std::string& worker_id,
                                   const v1::WorkerMessage::JobDone& d) {
  JobEntry* e = Entry(SplitGenerationJobId(d.job_id()).first);
  if (e == nullptr || !e->job.spec().elastic()) return;
  Generations(&e->job).EndedRankDone(worker_id, d);
}

void JobTable::MaybeScaleUp(JobEntry* e, int64_t previous_step,
                            const v1::WorkerMessage::Progress& p, Decisions* out) {
  const v1::JobSpec& spec = e->job.spec();
  const int64_t k = spec.checkpoint_every();
  if (!spec.elastic() || e->reforming || p.rank() != 0 || k <= 0 ||
      e->job.workers_size() >= spec.workers() || !queue_.empty() ||
      previous_step / k == p.step() / k || p.step() >= p.total_steps()) {
    return;
  }
  int idle = 0;
  for (const RegisteredWorker* w : workers_->Live()) idle += w->job_id.empty() ? 1 : 0;
  if (idle == 0) return;
  Reform(e,
         absl::StrCat("scaling up: ", idle, idle == 1 ? " idle worker" : " idle workers",
                      " to take in (", e->job.workers_size(), " of ", spec.workers(),
                      " ranks running)"),
         "", -1, out);
  Reschedule(out);
}

}  // namespace gradsync
