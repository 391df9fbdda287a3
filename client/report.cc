#include "client/report.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cost_model.h"
#include "common/spec/allreduce_algorithm.h"
#include "common/spec/job_spec.h"

namespace gradsync {

std::string JobErrorCodeName(const v1::Job& job) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(job.error_code()));
}

std::string JobErrorText(const v1::Job& job) {
  if (job.error_code() == 0) return job.error();
  return absl::StrCat(JobErrorCodeName(job), ": ", job.error());
}

namespace {

// Share of the training loop's time spent waiting for communication: the
// exposed part, not the part that overlapped computation.
double ExposedShare(const v1::JobResult& r) {
  const double loop = r.exposed_comm_seconds() + r.compute_seconds();
  return loop > 0 ? 100 * r.exposed_comm_seconds() / loop : 0.0;
}

// The first column's width: the longest label ("allreduce-async(s=1,wp)"),
// at least that of "strategy".
int LabelWidth(const std::vector<v1::Job>& jobs) {
  size_t width = 18;
  for (const v1::Job& j : jobs) width = std::max(width, StrategyLabel(j.spec()).size());
  return static_cast<int>(width);
}

std::string CompareRow(const v1::Job& j, int label_width) {
  const v1::JobResult& r = j.result();
  return absl::StrFormat(
      "%-*s %7d %9.4f %10.4f %8.2f %11.0f %8.2f %9.2f %8.0f%%  %s\n", label_width,
      StrategyLabel(j.spec()), j.spec().workers(), r.test_accuracy(),
      r.final_train_loss(), r.wall_seconds(), r.samples_per_second(), r.comm_seconds(),
      r.exposed_comm_seconds(), ExposedShare(r),
      j.state() == v1::SUCCEEDED
          ? "ok"
          : absl::StrCat(v1::JobState_Name(j.state()), ": ", JobErrorText(j)));
}

// An elastic job's settings and generations: who ran each, from which
// step, why it ended, what the re-formation cost.
void AddElasticJson(const v1::Job& job, nlohmann::json* out) {
  const v1::JobSpec& s = job.spec();
  nlohmann::json& j = *out;
  j["generation"] = job.generation();
  j["elastic"] = true;
  j["min_workers"] = s.min_workers();
  j["checkpoint_every"] = s.checkpoint_every();
  nlohmann::json gens = nlohmann::json::array();
  for (const v1::JobGeneration& g : job.generations()) {
    gens.push_back(
        {{"generation", g.generation()},
         {"worker_ids", std::vector<std::string>(g.workers().begin(), g.workers().end())},
         {"start_step", g.start_step()},
         {"end_step", g.end_step()},
         {"ended_because", g.ended_because()},
         {"lost_worker", g.lost_worker()},
         {"lost_rank", g.lost_rank()},
         {"reform_seconds", g.reform_seconds()},
         {"steps_redone", g.steps_redone()},
         {"committed", g.committed()}});
  }
  j["generations"] = gens;
}

// JobResult.slowest_rank as the results file writes it; null for one rank
// or an older coordinator.
nlohmann::json SlowestRankJson(const v1::JobResult& r) {
  if (!r.has_slowest_rank()) return nullptr;
  const v1::SlowestRank& s = r.slowest_rank();
  return {{"rank", s.rank()},
          {"worker_id", s.worker_id()},
          {"seconds_per_step", s.seconds_per_step()},
          {"others_median", s.others_median()},
          {"ratio", s.ratio()},
          {"named", s.named()}};
}

}  // namespace

nlohmann::json JobToJson(const v1::Job& job) {
  const v1::JobSpec& s = job.spec();
  const v1::JobResult& r = job.result();
  nlohmann::json j;
  j["job_id"] = job.id();
  j["name"] = s.name();
  j["state"] = v1::JobState_Name(job.state());
  j["error"] = job.error();
  j["error_code"] = JobErrorCodeName(job);
  if (!job.waiting_for().empty()) j["waiting_for"] = job.waiting_for();  // QUEUED
  j["strategy"] = StrategyName(s.strategy());
  j["mode"] = SyncModeName(s.mode());
  j["staleness"] = s.has_staleness() ? nlohmann::json(s.staleness()) : nlohmann::json();
  j["weight_prediction"] = s.weight_prediction() == v1::WEIGHT_PREDICTION_ON;
  j["slow_ranks"] = SlowRanksText(s);
  j["workers"] = s.workers();
  // Who ran it, by rank (empty before it starts).
  j["worker_ids"] = std::vector<std::string>(job.workers().begin(), job.workers().end());
  j["step"] = job.step();  // latest progress (rank 0)
  if (s.elastic()) AddElasticJson(job, &j);
  j["ps_shards"] = s.strategy() == v1::STRATEGY_PS ? s.ps_shards() : 0;
  // The size the workers cut with (a TorchScript model's spec says 0: picked).
  j["ps_partition_bytes"] = s.strategy() != v1::STRATEGY_PS ? 0
                            : r.ps_partition_bytes() > 0    ? r.ps_partition_bytes()
                                                            : s.ps_partition_bytes();
  j["model"] = s.model();
  j["num_params"] = r.num_params();
  j["device"] = DeviceName(s.device());
  j["optimizer"] = OptimizerName(s.optimizer());
  j["lr"] = s.lr();
  j["momentum"] = s.momentum();
  j["seed"] = s.seed();
  j["batch_size"] = s.batch_size();
  j["global_batch"] = r.global_batch();
  j["epochs"] = s.epochs();
  j["steps"] = r.steps() > 0 ? r.steps() : s.steps();
  // Equal, but in ps async jobs (the budget is the job's: a slow rank runs
  // fewer); "steps" is then their mean.
  j["steps_per_rank"] =
      std::vector<int64_t>(r.steps_per_rank().begin(), r.steps_per_rank().end());
  j["test_accuracy"] = r.test_accuracy();
  j["final_train_loss"] = r.final_train_loss();
  j["wall_seconds"] = r.wall_seconds();
  j["samples_per_second"] = r.samples_per_second();
  j["comm_seconds"] = r.comm_seconds();
  j["exposed_comm_seconds"] = r.exposed_comm_seconds();
  j["bucket_bytes"] =
      std::vector<int64_t>(r.bucket_bytes().begin(), r.bucket_bytes().end());
  j["bucket_algorithms"] = std::vector<std::string>(r.bucket_algorithms().begin(),
                                                    r.bucket_algorithms().end());
  j["algorithm_source"] = AlgorithmSource(s);
  j["device_name"] = r.device();
  j["compute_seconds"] = r.compute_seconds();
  j["comm_seconds_per_worker"] = std::vector<double>(r.comm_seconds_per_worker().begin(),
                                                     r.comm_seconds_per_worker().end());
  j["compute_seconds_per_rank"] = std::vector<double>(
      r.compute_seconds_per_rank().begin(), r.compute_seconds_per_rank().end());
  j["slowest_rank"] = SlowestRankJson(r);
  const double busy = r.comm_seconds() + r.compute_seconds();
  j["comm_share"] = busy > 0 ? r.comm_seconds() / busy : 0.0;
  j["exposed_share"] = ExposedShare(r) / 100;
  j["init_checksum"] = r.init_checksum();
  j["param_checksums"] =
      std::vector<std::string>(r.param_checksums().begin(), r.param_checksums().end());
  nlohmann::json per = nlohmann::json::array();
  for (const v1::EpochResult& e : r.epochs()) {
    per.push_back({{"epoch", e.epoch()},
                   {"train_loss", e.train_loss()},
                   {"test_accuracy", e.test_accuracy()},
                   // > 0: the job step (ps async) whose PS parameters were
                   // evaluated; 0: rank 0's own at the epoch's end.
                   {"evaluated_at_job_step", e.evaluated_at_job_step()},
                   {"seconds", e.seconds()}});
  }
  j["per_epoch"] = per;
  j["submit_time_ms"] = job.submit_time_ms();
  j["start_time_ms"] = job.start_time_ms();
  j["end_time_ms"] = job.end_time_ms();
  return j;
}

namespace {

// The cost model's shape of one allreduce of K bytes on N ranks (docs/architecture.md
// "Cost model", common/cost_model.h), in words: its sequential messages and
// the bytes each worker sends, as a multiple of K. Empty for an algorithm
// without a closed form here (hier: it depends on the host groups).
std::string AllreduceShape(const std::string& algorithm, int n, double k_mb) {
  const int p = 1 << FloorLog2(std::max(n, 1));
  const int log_p = FloorLog2(p);
  const int fold = n == p ? 0 : 2;  // the extra ranks' fold-in and fold-out
  if (algorithm == "ring") {
    return absl::StrFormat(
        "ring: 2(N-1) = %d sequential hops, 2(N-1)/N*K = %.2f MB sent per "
        "worker",
        2 * (n - 1), 2.0 * (n - 1) / n * k_mb);
  }
  if (algorithm == "hd") {
    return absl::StrFormat(
        "hd (halving-doubling): %d sequential exchanges, %.2f MB sent per "
        "worker",
        2 * log_p + fold, (2.0 * (p - 1) / p + (fold ? 1 : 0)) * k_mb);
  }
  if (algorithm == "rd" || algorithm == kOldRecursiveDoublingName) {
    return absl::StrFormat(
        "rd (recursive doubling): %d sequential exchanges of the whole "
        "vector, %.2f MB sent per worker",
        log_p + fold, (log_p + (fold ? 1 : 0)) * k_mb);
  }
  return "";
}

// "64 KiB", "1 MiB", or "940.0 KB" for a size that is neither.
std::string SizeText(int64_t bytes) {
  if (bytes > 0 && bytes % (1 << 20) == 0) return absl::StrCat(bytes >> 20, " MiB");
  if (bytes > 0 && bytes % (1 << 10) == 0) return absl::StrCat(bytes >> 10, " KiB");
  return absl::StrFormat("%.1f KB", static_cast<double>(bytes) / 1000.0);
}

}  // namespace

std::string HowItSynchronised(const v1::Job& job) {
  const v1::JobSpec& s = job.spec();
  const v1::JobResult& r = job.result();
  if (IsBench(s) || r.bucket_bytes_size() == 0) return "";
  if (s.strategy() == v1::STRATEGY_PS) {
    if (r.ps_partition_bytes() <= 0) return "";
    int64_t partitions = 0;
    for (int64_t b : r.bucket_bytes()) {
      partitions += (b + r.ps_partition_bytes() - 1) / r.ps_partition_bytes();
    }
    return absl::StrFormat("ps: %d partition%s of at most %s over %d shard%s",
                           static_cast<long long>(partitions), partitions == 1 ? "" : "s",
                           SizeText(r.ps_partition_bytes()), s.ps_shards(),
                           s.ps_shards() == 1 ? "" : "s");
  }
  if (r.bucket_algorithms_size() == 0) return "";
  std::string line = "allreduce:";
  for (int b = 0; b < r.bucket_algorithms_size(); ++b) {
    absl::StrAppend(&line, b == 0 ? " " : ", ", "bucket ", b, " ",
                    r.bucket_algorithms(b));
    if (b < r.bucket_bytes_size()) {
      absl::StrAppend(&line, " (", SizeText(r.bucket_bytes(b)), ")");
    }
  }
  const std::string source = AlgorithmSource(s);
  absl::StrAppend(&line, "; ",
                  source == "forced"  ? "forced by --algorithm"
                  : source == "tuned" ? "auto: the job's own tuning table (--autotune)"
                                      : "auto: the workers' tuning table");
  return line;
}

namespace {

// The allreduce algorithms the ring jobs among `jobs` ran (their buckets'),
// each once, in the order first seen.
std::vector<std::string> RingAlgorithms(const std::vector<v1::Job>& jobs) {
  std::vector<std::string> out;
  for (const v1::Job& j : jobs) {
    if (j.spec().strategy() != v1::STRATEGY_ALLREDUCE) continue;
    for (const std::string& a : j.result().bucket_algorithms()) {
      if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
    }
  }
  return out;
}

// The "why:" paragraph's first sentences: what one step moves through each
// strategy, for the allreduce algorithms the ring jobs really ran (the ring,
// when unknown).
std::string WhatAStepMoves(const std::vector<v1::Job>& jobs, int n, double k_mb) {
  std::vector<std::string> algorithms = RingAlgorithms(jobs);
  if (algorithms.empty()) algorithms.push_back("ring");
  std::string shapes;
  for (const std::string& a : algorithms) {
    const std::string shape = AllreduceShape(a, n, k_mb);
    absl::StrAppend(&shapes, shapes.empty() ? "" : "; ", shape.empty() ? a : shape);
  }
  std::string out = absl::StrFormat("each step moves K = %.2f MB of gradient. ", k_mb);
  if (algorithms.size() == 1 && algorithms[0] == "ring") {
    absl::StrAppend(&out, "The allreduce jobs ran the ", shapes, "; ");
  } else {
    absl::StrAppend(
        &out, "The allreduce jobs' buckets ran ", shapes,
        absl::StrFormat(" (a ring allreduce would take %d hops); ", 2 * (n - 1)));
  }
  absl::StrAppend(&out, absl::StrFormat("a single PS takes one round trip per worker but "
                                        "its link carries N*K = %.2f MB in and out.",
                                        n * k_mb));
  return out;
}

}  // namespace

std::string CompareTable(const std::vector<v1::Job>& jobs) {
  const int label_width = LabelWidth(jobs);
  std::string out =
      absl::StrFormat("%-*s %7s %9s %10s %8s %11s %8s %9s %9s  %s\n", label_width,
                      "strategy", "workers", "test_acc", "final_loss", "wall_s",
                      "samples/s", "comm_s", "exposed_s", "exposed%", "state");
  const v1::Job* fastest = nullptr;
  const v1::Job* slowest = nullptr;
  const v1::Job* best_acc = nullptr;
  for (const v1::Job& j : jobs) {
    const v1::JobResult& r = j.result();
    absl::StrAppend(&out, CompareRow(j, label_width));
    if (j.state() != v1::SUCCEEDED) continue;
    if (!fastest || r.samples_per_second() > fastest->result().samples_per_second())
      fastest = &j;
    if (!slowest || r.samples_per_second() < slowest->result().samples_per_second())
      slowest = &j;
    if (!best_acc || r.test_accuracy() > best_acc->result().test_accuracy())
      best_acc = &j;
  }
  if (fastest && slowest && fastest != slowest) {
    auto share = [](const v1::Job* j) { return ExposedShare(j->result()); };
    absl::StrAppend(
        &out, absl::StrFormat(
                  "\nfastest: %s at %.0f samples/s, %.2fx %s. Its workers waited "
                  "for communication %.0f%% of the time, against %.0f%% for %s.\n",
                  StrategyLabel(fastest->spec()), fastest->result().samples_per_second(),
                  fastest->result().samples_per_second() /
                      std::max(1.0, slowest->result().samples_per_second()),
                  StrategyLabel(slowest->spec()), share(fastest), share(slowest),
                  StrategyLabel(slowest->spec())));
    // Why, from the cost model (docs/architecture.md) and the measured per-step comm.
    const v1::Job& f = *fastest;
    const int n = f.spec().workers();
    const double k_mb = f.result().num_params() * 4.0 / 1e6;
    absl::StrAppend(&out, "per-step communication:");
    for (const v1::Job& j : jobs) {
      if (j.state() != v1::SUCCEEDED || j.result().steps() <= 0) continue;
      absl::StrAppend(
          &out, absl::StrFormat(" %s %.2f ms;", StrategyLabel(j.spec()),
                                1e3 * j.result().comm_seconds() / j.result().steps()));
    }
    absl::StrAppend(&out, "\n");
    absl::StrAppend(
        &out,
        absl::StrFormat("why: %s %s Async modes hide part of the communication behind "
                        "compute at the price of stale gradients (see test_acc).\n",
                        WhatAStepMoves(jobs, n, k_mb),
                        k_mb < 4.0
                            ? "At this size per-message latency and CPU time, not link "
                              "bandwidth, dominate, which favours the fewest sequential "
                              "messages; the ring's bandwidth advantage grows with K and "
                              "N (try a wider --model or more --workers)."
                            : "At this size bandwidth dominates, which favours the ring "
                              "as N grows; PS shards (--ps-shards) split the server "
                              "link."));
  }
  if (best_acc) {
    absl::StrAppend(&out, absl::StrFormat("best test accuracy: %s (%.4f)\n",
                                          StrategyLabel(best_acc->spec()),
                                          best_acc->result().test_accuracy()));
  }
  return out;
}

std::string EventLine(const v1::JobEvent& ev, const std::string& label) {
  switch (ev.kind()) {
    case v1::JobEvent::PROGRESS:
      return absl::StrFormat(
          "[%s %s] step %d/%d epoch %d loss %.4f %.0f samples/s comm %.0f%%", ev.job_id(),
          label, ev.step(), ev.total_steps(), ev.epoch(), ev.loss(),
          ev.samples_per_second(), 100 * ev.comm_share());
    case v1::JobEvent::EPOCH:
      return absl::StrFormat(
          "[%s %s] epoch %d: train loss %.4f, test accuracy %.4f, %.2f s", ev.job_id(),
          label, ev.epoch_result().epoch(), ev.epoch_result().train_loss(),
          ev.epoch_result().test_accuracy(), ev.epoch_result().seconds());
    case v1::JobEvent::STATE: {
      // An ending's message is the job's error; show it with its code.
      const std::string detail =
          ev.job().error_code() != 0 ? JobErrorText(ev.job()) : ev.message();
      return absl::StrFormat("[%s %s] %s%s", ev.job_id(), label,
                             v1::JobState_Name(ev.state()),
                             detail.empty() || detail == v1::JobState_Name(ev.state())
                                 ? ""
                                 : absl::StrCat(": ", detail));
    }
    case v1::JobEvent::STALL:
      return absl::StrFormat("[%s %s] stall: %s", ev.job_id(), label, ev.message());
    case v1::JobEvent::STRAGGLER:  // the message starts "straggler: "
      return absl::StrFormat("[%s %s] %s", ev.job_id(), label, ev.message());
    default:
      return "";
  }
}

}  // namespace gradsync
