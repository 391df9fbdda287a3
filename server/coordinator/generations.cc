#include "server/coordinator/generations.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gradsync {
namespace {

constexpr char kGenerationMark[] = ".g";

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

int Generations::Committed(const v1::Job& job) {
  for (int i = job.generations_size() - 1; i >= 0; --i) {
    if (job.generations(i).committed()) return job.generations(i).generation();
  }
  return -1;
}

int Generations::World(const v1::Job& job, int g) {
  for (const v1::JobGeneration& r : job.generations()) {
    if (r.generation() == g) return r.workers_size();
  }
  return 0;
}

v1::JobGeneration* Generations::Find(int g) const {
  for (v1::JobGeneration& r : *job_->mutable_generations()) {
    if (r.generation() == g) return &r;
  }
  return nullptr;
}

void Generations::Start(int64_t now_ms) {
  v1::JobGeneration* g = job_->add_generations();
  g->set_generation(job_->generation());
  *g->mutable_workers() = job_->workers();
  g->set_start_time_ms(now_ms);
  g->set_lost_rank(-1);
}

void Generations::End(const std::string& why, const std::string& lost_worker,
                      int lost_rank, int64_t now_ms) {
  v1::JobGeneration* g = Find(job_->generation());
  if (g == nullptr) return;
  // A generation that never reported trained no step of its own.
  g->set_end_step(g->committed() ? job_->step() : g->start_step());
  g->set_ended_because(why);
  g->set_end_time_ms(now_ms);
  g->set_lost_worker(lost_worker);
  g->set_lost_rank(lost_rank);
}

int Generations::WithoutProgressInARow() const {
  int without = 0;
  for (int i = job_->generations_size() - 1; i >= 0; --i) {
    const v1::JobGeneration& g = job_->generations(i);
    const bool ended = g.end_time_ms() > 0;
    if (g.committed() && (!ended || g.end_step() > g.start_step())) break;
    ++without;
  }
  return without;
}

std::string Generations::Commit(int64_t step, double reform_seconds) {
  v1::JobGeneration* g = Find(job_->generation());
  if (g == nullptr || g->committed()) return "";
  // Rank 0 reports once its starting state is checkpointed (allreduce: it
  // saved it; PS: every slice wrote it at Init).
  g->set_committed(true);
  g->set_start_step(step);
  std::string text = absl::StrCat("generation ", g->generation(), " training from step ",
                                  step, " on ", g->workers_size(), " workers");
  if (g->generation() > 0) {
    g->set_reform_seconds(reform_seconds);
    UpdateStepsRedone();
    absl::StrAppend(&text, " (re-formed in ", absl::StrFormat("%.2f", reform_seconds),
                    " s; ", g->steps_redone(), " steps redone)");
  }
  return text;
}

void Generations::UpdateStepsRedone() {
  // The work redone is that of the last generation that trained before it
  // (one that never reported did none).
  const v1::JobGeneration* prev = nullptr;
  for (v1::JobGeneration& r : *job_->mutable_generations()) {
    if (!r.committed()) continue;
    if (prev != nullptr) {
      r.set_steps_redone(std::max<int64_t>(0, prev->end_step() - r.start_step()));
    }
    prev = &r;
  }
}

bool Generations::EndedRankDone(const std::string& worker_id,
                                const v1::WorkerMessage::JobDone& d) {
  const int g = SplitGenerationJobId(d.job_id()).second;
  if (g >= job_->generation()) return false;
  v1::JobGeneration* r = Find(g);
  if (r == nullptr || !r->committed() || d.steps() <= r->end_step() || d.rank() < 0 ||
      d.rank() >= r->workers_size() || r->workers(d.rank()) != worker_id) {
    return false;
  }
  // Rank 0 reports progress every half second; a cancelled rank's JobDone
  // says how far it really got.
  r->set_end_step(d.steps());
  UpdateStepsRedone();
  return true;
}

v1::WorkerTrace Generations::Trace(const v1::Job& job, int64_t now_ms) {
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
    const int64_t end = g.end_time_ms() > 0 ? g.end_time_ms() : now_ms;
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
