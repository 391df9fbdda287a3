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
namespace {

constexpr char kGenerationMark[] = ".g";

v1::JobGeneration* FindGeneration(v1::Job* job, int g) {
  for (v1::JobGeneration& r : *job->mutable_generations()) {
    if (r.generation() == g) return &r;
  }
  return nullptr;
}

}  // namespace

std::string GenerationJobId(const std::string& job_id, int generation) {
  if (generation <= 0) return job_id;
  return absl::StrCat(job_id, kGenerationMark, generation);
}

std::pair<std::string, int> SplitGenerationJobId(const std::string& data_plane_id) {
  const size_t at = data_plane_id.rfind(kGenerationMark);
  int g = 0;
  if (at == std::string::npos || at == 0 ||
      !absl::SimpleAtoi(absl::string_view(data_plane_id).substr(at + 2), &g) || g <= 0 ||
      data_plane_id != GenerationJobId(data_plane_id.substr(0, at), g)) {
    return {data_plane_id, 0};
  }
  return {data_plane_id.substr(0, at), g};
}

int JobTable::CommittedGeneration(const v1::Job& job) {
  for (int i = job.generations_size() - 1; i >= 0; --i) {
    if (job.generations(i).committed()) return job.generations(i).generation();
  }
  return -1;
}

int JobTable::GenerationWorld(const v1::Job& job, int g) {
  for (const v1::JobGeneration& r : job.generations()) {
    if (r.generation() == g) return r.workers_size();
  }
  return 0;
}

void JobTable::Reform(JobEntry* e, const std::string& why, const std::string& lost_worker,
                      int lost_rank, Decisions* out) {
  const std::string& id = e->job.id();
  const int gen = e->job.generation();
  if (v1::JobGeneration* g = FindGeneration(&e->job, gen); g != nullptr) {
    // A generation that never reported trained no step of its own.
    g->set_end_step(g->committed() ? e->job.step() : g->start_step());
    g->set_ended_because(why);
    g->set_end_time_ms(NowMs());
    g->set_lost_worker(lost_worker);
    g->set_lost_rank(lost_rank);
  }
  if (gen + 1 >= kMaxGenerations) {
    EndJob(e, v1::FAILED,
           absl::UnavailableError(absl::StrCat("elastic job gave up after ", gen + 1,
                                               " generations; the last ended because ",
                                               why)),
           out);
    return;
  }
  int unstarted = 0;
  for (int i = e->job.generations_size() - 1;
       i >= 0 && !e->job.generations(i).committed(); --i) {
    ++unstarted;
  }
  if (unstarted >= kMaxUnstartedGenerations) {
    EndJob(
        e, v1::FAILED,
        absl::UnavailableError(absl::StrCat(
            "elastic job: ", unstarted,
            " generations in a row ended before they trained; the last because ", why)),
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
    int idle = 0, stopping = 0;
    for (const RegisteredWorker* w : live) {
      if (w->job_id.empty()) ++idle;
      if (w->job_id == old_id) ++stopping;
    }
    // Enough idle workers for the whole job (spares): go now. Else wait a
    // moment for the survivors, which were cancelled, to become idle.
    const bool survivors_pending = stopping > 0 && idle < spec.workers() &&
                                   env_->Now() - e->reform_since < kSurvivorWait;
    const int n = std::min(spec.workers(), idle);
    if (!survivors_pending && n >= spec.min_workers()) {
      std::vector<const RegisteredWorker*> picked = workers_->PickIdle(n);
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
      if (RoomForEvent(e)) AppendStateEvent(e, text, out);
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
  v1::JobGeneration* g = FindGeneration(&e->job, e->job.generation());
  if (g == nullptr || g->committed()) return;
  // Rank 0 reports once its starting state is checkpointed (allreduce: it
  // saved it; PS: every slice wrote it at Init).
  g->set_committed(true);
  g->set_start_step(p.step());
  std::string text = absl::StrCat("generation ", g->generation(), " training from step ",
                                  p.step(), " on ", g->workers_size(), " workers");
  if (g->generation() > 0) {
    g->set_reform_seconds(absl::ToDoubleSeconds(env_->Now() - e->reform_since));
    UpdateStepsRedone(e);
    absl::StrAppend(&text, " (re-formed in ",
                    absl::StrFormat("%.2f", g->reform_seconds()), " s; ",
                    g->steps_redone(), " steps redone)");
  }
  spdlog::info("[job {}] {}", e->job.id(), text);
  if (RoomForEvent(e)) {
    Decisions ignored;  // the caller's progress update wakes watchers
    AppendStateEvent(e, text, &ignored);
  }
  Save(e).IgnoreError();  // logged by Save
}

void JobTable::UpdateStepsRedone(JobEntry* e) {
  // The work redone is that of the last generation that trained before it
  // (one that never reported did none).
  const v1::JobGeneration* prev = nullptr;
  for (v1::JobGeneration& r : *e->job.mutable_generations()) {
    if (!r.committed()) continue;
    if (prev != nullptr) {
      r.set_steps_redone(std::max<int64_t>(0, prev->end_step() - r.start_step()));
    }
    prev = &r;
  }
}

void JobTable::EndedGenerationDone(const std::string& worker_id,
                                   const v1::WorkerMessage::JobDone& d) {
  const auto [id, g] = SplitGenerationJobId(d.job_id());
  JobEntry* e = Entry(id);
  if (e == nullptr || !e->job.spec().elastic() || g >= e->job.generation()) return;
  v1::JobGeneration* r = FindGeneration(&e->job, g);
  if (r == nullptr || !r->committed() || d.steps() <= r->end_step() || d.rank() < 0 ||
      d.rank() >= r->workers_size() || r->workers(d.rank()) != worker_id) {
    return;
  }
  // Rank 0 reports progress every half second; a cancelled rank's JobDone
  // says how far it really got.
  r->set_end_step(d.steps());
  UpdateStepsRedone(e);
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

v1::WorkerTrace JobTable::GenerationsTrace(const v1::Job& job) const {
  v1::WorkerTrace t;
  t.set_rank(-1);
  t.set_worker_id("coordinator");
  auto add = [&t](const std::string& name, int thread, int64_t start_ms, int64_t dur_us,
                  int64_t step) {
    v1::TraceEvent* ev = t.add_events();
    ev->set_name(name);
    ev->set_category("elastic");
    ev->set_thread(thread);
    ev->set_start_us(start_ms * 1000);
    ev->set_dur_us(dur_us);
    ev->set_step(step);
    ev->set_bucket(-1);
    ev->set_layer(-1);
  };
  for (int i = 0; i < job.generations_size(); ++i) {
    const v1::JobGeneration& g = job.generations(i);
    // The last generation runs until now (the job is being finalised).
    const int64_t end = g.end_time_ms() > 0 ? g.end_time_ms() : NowMs();
    add(absl::StrCat("generation ", g.generation(), ": ", g.workers_size(),
                     " ranks from step ", g.start_step()),
        kGenerationsThread, g.start_time_ms(),
        std::max<int64_t>(0, end - g.start_time_ms()) * 1000, g.start_step());
    if (!g.ended_because().empty()) {
      add(absl::StrCat("generation ", g.generation(), " ended: ", g.ended_because()),
          kGenerationsThread, g.end_time_ms(), -1, g.end_step());
      if (i + 1 < job.generations_size()) {
        const v1::JobGeneration& next = job.generations(i + 1);
        add(absl::StrCat("re-formation: ", next.steps_redone(), " steps redone"),
            kReformationsThread, g.end_time_ms(),
            std::llround(next.reform_seconds() * 1e6), next.start_step());
      }
    }
  }
  return t;
}

}  // namespace gradsync
