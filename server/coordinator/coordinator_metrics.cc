#include "server/coordinator/coordinator_metrics.h"

#include <utility>

namespace gradsync {
namespace {

constexpr v1::JobState kStates[] = {v1::QUEUED, v1::RUNNING, v1::SUCCEEDED, v1::FAILED,
                                    v1::CANCELLED};

bool Finished(v1::JobState s) {
  return s == v1::SUCCEEDED || s == v1::FAILED || s == v1::CANCELLED;
}

// One sample per state (`only_finished`: the terminal ones), label = its
// name.
std::vector<MetricSample> ByState(const CoordinatorStats& s, bool only_finished) {
  std::vector<MetricSample> out;
  for (v1::JobState state : kStates) {
    if (only_finished && !Finished(state)) continue;
    out.push_back({{v1::JobState_Name(state)}, static_cast<double>(s.jobs.at(state))});
  }
  return out;
}

std::vector<MetricSample> One(int64_t v) { return {{{}, static_cast<double>(v)}}; }

// One sample per running job with a slowest rank: `value` of it.
std::vector<MetricSample> PerJob(const CoordinatorStats& s,
                                 double (*value)(const v1::SlowestRank&)) {
  std::vector<MetricSample> out;
  for (const auto& [job, slow] : s.slowest) out.push_back({{job}, value(slow)});
  return out;
}

}  // namespace

CoordinatorStats CountCoordinatorStats(const std::vector<const v1::Job*>& jobs,
                                       const std::vector<const RegisteredWorker*>& live) {
  CoordinatorStats s;
  for (v1::JobState state : kStates) s.jobs[state] = 0;
  for (const v1::Job* j : jobs) {
    if (s.jobs.count(j->state())) ++s.jobs[j->state()];
    for (const v1::JobGeneration& g : j->generations()) {
      if (g.generation() > 0) ++s.reformations;
      s.steps_redone += g.steps_redone();
    }
    if (j->state() == v1::RUNNING && j->result().has_slowest_rank()) {
      s.slowest[j->id()] = j->result().slowest_rank();
    }
  }
  s.jobs_total = static_cast<int64_t>(jobs.size());
  for (const RegisteredWorker* w : live) {
    ++s.live_workers;
    if (!w->job_id.empty()) ++s.busy_workers;
  }
  return s;
}

void RegisterCoordinatorMetrics(std::function<CoordinatorStats()> stats,
                                MetricsRegistry* r) {
  auto f = std::make_shared<std::function<CoordinatorStats()>>(std::move(stats));
  r->AddCallback("gradsync_server_jobs", "Jobs in the job table, by state.",
                 MetricType::kGauge, {"state"}, [f] { return ByState((*f)(), false); });
  r->AddCallback("gradsync_server_queue_length",
                 "Jobs waiting for workers (state QUEUED).", MetricType::kGauge, {},
                 [f] { return One((*f)().jobs.at(v1::QUEUED)); });
  r->AddCallback("gradsync_server_registered_workers",
                 "Live workers registered with the coordinator.", MetricType::kGauge, {},
                 [f] { return One((*f)().live_workers); });
  r->AddCallback("gradsync_server_busy_workers", "Live workers assigned to a job.",
                 MetricType::kGauge, {}, [f] { return One((*f)().busy_workers); });
  r->AddCallback("gradsync_server_jobs_submitted_total",
                 "Jobs accepted since the coordinator started.", MetricType::kCounter, {},
                 [f] { return One((*f)().jobs_total); });
  r->AddCallback("gradsync_server_elastic_reformations_total",
                 "Generations of elastic jobs (in the job table) that replaced one that "
                 "lost a rank or scaled up.",
                 MetricType::kCounter, {}, [f] { return One((*f)().reformations); });
  r->AddCallback("gradsync_server_elastic_steps_redone_total",
                 "Steps that elastic jobs' later generations did again (work lost to "
                 "re-formations).",
                 MetricType::kCounter, {}, [f] { return One((*f)().steps_redone); });
  r->AddCallback("gradsync_server_jobs_finished_total",
                 "Jobs that ended since the coordinator started, by final state.",
                 MetricType::kCounter, {"state"}, [f] { return ByState((*f)(), true); });
  r->AddCallback("gradsync_job_slowest_rank",
                 "Running jobs: the rank with the most compute per step over its latest "
                 "report.",
                 MetricType::kGauge, {"job"}, [f] {
                   return PerJob((*f)(), [](const v1::SlowestRank& s) {
                     return static_cast<double>(s.rank());
                   });
                 });
  r->AddCallback(
      "gradsync_job_slowest_rank_ratio",
      "Running jobs: the slowest rank's compute per step over the other "
      "ranks' median (1 = even).",
      MetricType::kGauge, {"job"},
      [f] { return PerJob((*f)(), [](const v1::SlowestRank& s) { return s.ratio(); }); });
}

}  // namespace gradsync
