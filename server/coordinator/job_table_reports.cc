// The job table's worker reports (see job_table.h): progress, epoch
// results and JobDone from a rank's session, what they lead to (the job's
// result, or its failure, with the symptom-grace rule), and lost workers.
#include <algorithm>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/ps_layout.h"
#include "common/spec/job_spec.h"
#include "common/spec/peer_blame.h"
#include "server/coordinator/bench_merge.h"
#include "server/coordinator/job_table.h"
#include "server/coordinator/straggler_watch.h"

namespace gradsync {
namespace {

// Codes a rank reports when a peer or the coordinator vanished under it.
bool LooksLikeSymptom(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kCancelled ||
         code == absl::StatusCode::kAborted ||
         code == absl::StatusCode::kDeadlineExceeded;
}

// The partition size a PS job's workers cut `res`'s buckets with, as they
// resolved it (MakeJobPsLayout, worker/sync/ps_partitions.h): the spec's,
// or for 0 the pick for the buckets' total on `n` workers.
int64_t PartitionBytesCutWith(const v1::JobSpec& spec, const v1::JobResult& res, int n) {
  std::vector<Range> buckets;
  for (int64_t b : res.bucket_bytes()) {
    buckets.push_back(Range{0, static_cast<size_t>(b / 4)});
  }
  return static_cast<int64_t>(ResolvePsPartitionBytes(
      spec.ps_partition_bytes(), buckets, spec.ps_shards(), std::max(spec.workers(), n)));
}

}  // namespace

void JobTable::HandleProgress(const std::string& worker_id,
                              const v1::WorkerMessage::Progress& p, Decisions* out) {
  JobEntry* e = RankEntry(p.job_id(), p.rank(), worker_id);
  if (e == nullptr || e->job.state() != v1::RUNNING) return;
  e->rank_samples_per_second[p.rank()] = p.samples_per_second();
  CheckInitChecksum(e, p, out);
  if (e->job.state() != v1::RUNNING) {
    PruneEnded();
    return;
  }
  double job_sps = 0;
  for (double s : e->rank_samples_per_second) job_sps += s;
  e->curves.AddProgress(p, job_sps, NowMs());
  StragglerReported(e, p, out);
  if (p.rank() != 0) return;
  const int64_t previous_step = e->job.step();
  if (e->job.spec().elastic() && !p.init_checksum().empty()) GenerationReported(e, p);
  UpdateProgressEvent(e, p, out);
  MaybeScaleUp(e, previous_step, p, out);
}

void JobTable::SetSlowestRank(const JobEntry* e, const StragglerWatch::Lag& slow,
                              v1::SlowestRank* out) {
  out->set_rank(slow.rank);
  out->set_worker_id(e->job.workers(slow.rank));
  out->set_seconds_per_step(slow.seconds_per_step);
  out->set_others_median(slow.others_median);
  out->set_ratio(slow.ratio);
  out->set_named(e->stragglers.straggler() == slow.rank);
}

void JobTable::SetWholeRunSlowestRank(JobEntry* e) {
  v1::JobResult* res = e->job.mutable_result();
  res->clear_slowest_rank();
  std::vector<double> seconds_per_step;
  for (const v1::WorkerMessage::JobDone& d : e->results) {
    seconds_per_step.push_back(d.steps() > 0 ? d.compute_seconds() / d.steps() : -1);
  }
  const StragglerWatch::Lag slow = StragglerWatch::SlowestOf(seconds_per_step);
  if (seconds_per_step.size() >= 2 && slow.rank >= 0) {
    SetSlowestRank(e, slow, res->mutable_slowest_rank());
  }
}

void JobTable::StragglerReported(JobEntry* e, const v1::WorkerMessage::Progress& p,
                                 Decisions* out) {
  const std::string line = e->stragglers.Add(p.rank(), p.step(), p.compute_seconds());
  // The slowest rank so far, in the job as its status and /metrics show it
  // (once per rank 0 report; the job's end replaces it with the whole run's).
  if (p.rank() == 0) {
    if (const StragglerWatch::Lag slow = e->stragglers.Slowest(); slow.rank >= 0) {
      SetSlowestRank(e, slow, e->job.mutable_result()->mutable_slowest_rank());
    }
  }
  if (line.empty()) return;
  const std::string text = absl::StrCat(line, ", worker ", e->job.workers(p.rank()));
  spdlog::warn("[{}] {}", e->job.id(), text);
  v1::JobEvent ev = NewEvent(e, v1::JobEvent::STRAGGLER, p.step());
  ev.set_message(text);
  AddEvent(e, std::move(ev));
  out->events_changed = true;
}

v1::JobEvent JobTable::NewEvent(const JobEntry* e, v1::JobEvent::Kind kind,
                                int64_t step) {
  v1::JobEvent ev;
  ev.set_kind(kind);
  ev.set_job_id(e->job.id());
  ev.set_state(e->job.state());
  ev.set_step(step);
  ev.set_total_steps(e->job.total_steps());
  return ev;
}

void JobTable::AddEvent(JobEntry* e, v1::JobEvent ev) {
  if (retention_.RoomForEvent(e)) e->events.push_back(std::move(ev));
  ++e->seq;
}

void JobTable::CheckInitChecksum(JobEntry* e, const v1::WorkerMessage::Progress& p,
                                 Decisions* out) {
  if (p.init_checksum().empty() || !e->init_checksums[p.rank()].empty()) return;
  e->init_checksums[p.rank()] = p.init_checksum();
  for (int r = 0; r < e->job.workers_size(); ++r) {
    const std::string& c = e->init_checksums[r];
    if (!c.empty() && c != p.init_checksum()) {
      EndJob(e, v1::FAILED,
             absl::DataLossError(absl::StrCat("initial parameters differ: rank ", r,
                                              " has ", c, ", rank ", p.rank(), " has ",
                                              p.init_checksum())),
             out);
      return;
    }
  }
  e->job.mutable_result()->set_init_checksum(p.init_checksum());
}

void JobTable::UpdateProgressEvent(JobEntry* e, const v1::WorkerMessage::Progress& p,
                                   Decisions* out) {
  // Job-wide steps (ps async): the job's step is the PS's count, not the
  // reporting rank's own (each rank's is in the dashboard's rank table).
  const int64_t step =
      p.job_step() > 0 ? std::max(e->job.step(), p.job_step()) : p.step();
  e->job.set_step(step);
  e->job.set_total_steps(p.total_steps());
  v1::JobEvent& ev = e->progress;
  ev.set_kind(v1::JobEvent::PROGRESS);
  ev.set_job_id(e->job.id());
  ev.set_state(e->job.state());
  ev.set_step(step);
  ev.set_total_steps(e->job.total_steps());
  ev.set_epoch(p.epoch());
  ev.set_loss(p.loss());
  double sps = 0;
  for (double s : e->rank_samples_per_second) sps += s;
  ev.set_samples_per_second(sps);
  const double busy = p.comm_seconds() + p.compute_seconds();
  ev.set_comm_share(busy > 0 ? p.comm_seconds() / busy : 0);
  ++e->progress_seq;
  ++e->seq;
  out->events_changed = true;
}

void JobTable::HandleEpochDone(const std::string& worker_id,
                               const v1::WorkerMessage::EpochDone& d, Decisions* out) {
  JobEntry* e = RankEntry(d.job_id(), d.rank(), worker_id);
  if (e == nullptr || e->job.state() != v1::RUNNING) return;
  std::vector<v1::WorkerMessage::EpochDone>& ranks = e->epochs[d.epoch()];
  ranks.push_back(d);
  if (static_cast<int>(ranks.size()) != e->job.workers_size()) return;
  v1::EpochResult er;
  er.set_epoch(d.epoch());
  double loss = 0, secs = 0;
  for (const v1::WorkerMessage::EpochDone& x : ranks) {
    loss += x.train_loss();
    secs = std::max(secs, x.seconds());
    if (x.rank() == 0) {
      er.set_test_accuracy(x.test_accuracy());
      er.set_evaluated_at_job_step(x.job_step());
    }
  }
  er.set_train_loss(loss / ranks.size());
  er.set_seconds(secs);
  // An elastic job's later generation may end an epoch again (it resumed
  // before that epoch's end): the newest result replaces the older.
  v1::JobResult* res = e->job.mutable_result();
  auto same =
      std::find_if(res->mutable_epochs()->begin(), res->mutable_epochs()->end(),
                   [&](const v1::EpochResult& x) { return x.epoch() == er.epoch(); });
  if (same != res->mutable_epochs()->end()) {
    *same = er;
  } else {
    *res->add_epochs() = er;
  }
  e->curves.AddEpoch(er, e->job.step(), NowMs());
  v1::JobEvent ev = NewEvent(e, v1::JobEvent::EPOCH, e->job.step());
  ev.set_epoch(d.epoch());
  *ev.mutable_epoch_result() = er;
  AddEvent(e, std::move(ev));
  e->epochs.erase(d.epoch());
  Save(e).IgnoreError();  // logged by Save
  spdlog::info("[job {}] epoch {}: train loss {:.4f}, test accuracy {:.4f}, {:.2f} s",
               e->job.id(), er.epoch(), er.train_loss(), er.test_accuracy(),
               er.seconds());
  out->events_changed = true;
}

void JobTable::HandleJobDone(const std::string& worker_id,
                             const v1::WorkerMessage::JobDone& d, Decisions* out) {
  workers_->Release(worker_id, d.job_id());  // idle again
  JobEntry* e = RankEntry(d.job_id(), d.rank(), worker_id);
  if (e == nullptr) EndedGenerationDone(worker_id, d);
  if (e != nullptr && !e->done[d.rank()]) {
    e->done[d.rank()] = true;
    e->results[d.rank()] = d;
    if (IsTerminal(e->job.state())) e->results[d.rank()].clear_trace();
    e->rank_wall[d.rank()] = d.wall_seconds();
    if (e->job.state() == v1::RUNNING && d.code() != 0) {
      RankFailed(e, worker_id, d, out);
    }
    if (e->job.state() == v1::RUNNING &&
        std::all_of(e->done.begin(), e->done.end(), [](bool b) { return b; })) {
      if (e->pending_error.ok()) {
        Finalize(e, out);
      } else if (e->job.spec().elastic()) {
        const absl::Status pending = e->pending_error;
        Reform(e, std::string(pending.message()), e->pending_blamed_worker,
               e->pending_blamed_rank, out);
      } else {
        const absl::Status pending = e->pending_error;
        EndJob(e, v1::FAILED, pending, out);
      }
    }
  }
  Reschedule(out);
  PruneEnded();
}

void JobTable::RankFailed(JobEntry* e, const std::string& worker_id,
                          const v1::WorkerMessage::JobDone& d, Decisions* out) {
  const auto code = static_cast<absl::StatusCode>(d.code());
  std::string message =
      absl::StrCat("rank ", d.rank(), " (worker ", worker_id, "): ", d.error());
  if (!LooksLikeSymptom(code)) {
    EndJob(e, v1::FAILED, absl::Status(code, message), out);
    return;
  }
  // Name every rank so that "rank 2" in a peer's message can be read.
  absl::StrAppend(&message, " [ranks:");
  for (int r = 0; r < e->job.workers_size(); ++r) {
    absl::StrAppend(&message, " ", r, "=", e->job.workers(r));
  }
  absl::StrAppend(&message, "]");
  if (e->pending_error.ok()) {
    e->pending_error = absl::Status(code, message);
    e->pending_since = env_->Now();
    const int blamed = BlamedPeerRank(d.error());
    e->pending_blamed_rank = blamed >= 0 && blamed < e->job.workers_size() ? blamed : -1;
    e->pending_blamed_worker =
        e->pending_blamed_rank >= 0 ? e->job.workers(e->pending_blamed_rank) : "";
  }
}

void JobTable::WorkerLost(const std::string& worker_id, const std::string& why,
                          Decisions* out) {
  const RegisteredWorker* w = workers_->MarkDead(worker_id);
  if (w == nullptr) return;
  spdlog::warn("worker {} ({}) lost: {}", w->id, w->peer_address, why);
  // Fewer workers: a waiting head job may no longer be able to run at all.
  Schedule(out);
  if (w->job_id.empty()) return;
  const auto [job_id, generation] = SplitGenerationJobId(w->job_id);
  JobEntry* e = Entry(job_id);
  // A rank of an ended generation: that generation is gone already.
  if (e == nullptr || e->job.state() != v1::RUNNING || e->reforming ||
      e->job.generation() != generation) {
    return;
  }
  int rank = -1;
  for (int r = 0; r < e->job.workers_size(); ++r) {
    if (e->job.workers(r) == w->id) rank = r;
  }
  const std::string lost = absl::StrCat("worker ", w->id, " (rank ", rank, ", ",
                                        w->peer_address, ") lost: ", why);
  if (e->job.spec().elastic()) {
    Reform(e, lost, w->id, rank, out);
    Reschedule(out);
  } else {
    EndJob(e, v1::FAILED, absl::UnavailableError(lost), out);
  }
  PruneEnded();
}

void JobTable::ExpireSymptoms(Decisions* out) {
  const absl::Time now = env_->Now();
  for (auto& [id, e] : jobs_) {
    if (e.job.state() == v1::RUNNING && !e.pending_error.ok() &&
        now - e.pending_since >= kSymptomGrace) {
      const absl::Status pending = e.pending_error;
      if (e.job.spec().elastic()) {
        Reform(&e, std::string(pending.message()), e.pending_blamed_worker,
               e.pending_blamed_rank, out);
      } else {
        EndJob(&e, v1::FAILED, pending, out);
      }
    }
  }
  ExpireReforming(out);  // also places those whose survivors took too long
  PruneEnded();
}

void JobTable::Finalize(JobEntry* e, Decisions* out) {
  if (IsBench(e->job.spec())) {
    absl::StatusOr<v1::BenchResult> merged =
        MergeBenchResults(e->job.spec().bench(), e->results);
    if (merged.ok()) *e->job.mutable_result()->mutable_bench() = *merged;
    e->job.mutable_result()->set_wall_seconds(
        absl::ToDoubleSeconds(env_->Now() - e->started));
    EndJob(e, merged.ok() ? v1::SUCCEEDED : v1::FAILED, merged.status(), out);
    return;
  }
  const int n = e->job.workers_size();
  v1::JobResult* res = e->job.mutable_result();
  double comm = 0, compute = 0, last_loss = 0, max_wall = 0, exposed = 0;
  int64_t samples = 0, steps = 0;
  res->clear_param_checksums();
  res->clear_comm_seconds_per_worker();
  res->clear_steps_per_rank();
  res->clear_compute_seconds_per_rank();
  for (int r = 0; r < n; ++r) {
    const v1::WorkerMessage::JobDone& d = e->results[r];
    comm += d.comm_seconds();
    exposed += d.exposed_comm_seconds();
    compute += d.compute_seconds();
    last_loss += d.last_step_loss();
    samples += d.samples();
    steps += d.steps();
    res->add_steps_per_rank(d.steps());
    max_wall = std::max(max_wall, e->rank_wall[r]);
    res->add_param_checksums(d.param_checksum());
    res->add_comm_seconds_per_worker(d.comm_seconds());
    res->add_compute_seconds_per_rank(d.compute_seconds());
  }
  SetWholeRunSlowestRank(e);
  const v1::JobSpec& spec = e->job.spec();
  res->set_comm_seconds(comm / n);
  res->set_exposed_comm_seconds(exposed / n);
  res->set_device(e->results[0].device());
  res->mutable_bucket_bytes()->CopyFrom(e->results[0].bucket_bytes());
  if (res->num_params() == 0) {
    // A TorchScript model: only the workers know its size; their buckets
    // cover every parameter.
    int64_t bytes = 0;
    for (int64_t b : res->bucket_bytes()) bytes += b;
    res->set_num_params(bytes / 4);
  }
  res->mutable_bucket_algorithms()->CopyFrom(e->results[0].bucket_algorithms());
  if (UsesPs(spec)) res->set_ps_partition_bytes(PartitionBytesCutWith(spec, *res, n));
  res->set_compute_seconds(compute / n);
  res->set_final_train_loss(last_loss / n);
  res->set_test_accuracy(e->results[0].test_accuracy());
  // Equal on every rank, but with job-wide steps (ps async): the mean is the
  // pushes the PS applied / world.
  res->set_steps(spec.elastic() ? e->results[0].steps() : steps / n);
  // An elastic job keeps its global batch whatever its generation's size.
  const int64_t global =
      static_cast<int64_t>(spec.batch_size()) * (spec.elastic() ? spec.workers() : n);
  res->set_global_batch(global);
  res->set_ps_shards(spec.strategy() == v1::STRATEGY_PS ? spec.ps_shards() : 0);
  res->set_wall_seconds(absl::ToDoubleSeconds(env_->Now() - e->started));
  res->set_samples_per_second(max_wall > 0 ? samples / max_wall : 0);
  if (spec.elastic() && e->job.generation() > 0 && res->wall_seconds() > 0) {
    // Every generation's work (redone steps not counted twice).
    res->set_samples_per_second(static_cast<double>(e->results[0].steps()) * global /
                                res->wall_seconds());
  }
  if (absl::Status same =
          CheckFinalChecksums(*res, spec.strategy() == v1::STRATEGY_ALLREDUCE
                                        ? "ring replicas diverged"
                                        : "PS ranks ended with different parameters");
      !same.ok()) {
    EndJob(e, v1::FAILED, same, out);
    return;
  }
  e->job.set_step(res->steps());
  if (spec.trace()) {
    // An elastic job's ranks traced the last generation; the coordinator's
    // lane shows every generation and re-formation.
    const v1::WorkerTrace lane = Generations::Trace(e->job, NowMs());
    retention_.KeepTraces(e, spec.elastic() ? &lane : nullptr);
  }
  EndJob(e, v1::SUCCEEDED, absl::OkStatus(), out);
}

}  // namespace gradsync
