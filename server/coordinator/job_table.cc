// The job table and scheduler (see job_table.h): submission, placement,
// worker reports, ending jobs, results and the event log.
#include "server/coordinator/job_table.h"

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/ps_layout.h"
#include "common/spec/job_spec.h"
#include "server/coordinator/bench_merge.h"

namespace gradsync {
namespace {

// Codes a rank reports when a peer or the coordinator vanished under it.
bool LooksLikeSymptom(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable ||
         code == absl::StatusCode::kCancelled ||
         code == absl::StatusCode::kAborted ||
         code == absl::StatusCode::kDeadlineExceeded;
}

bool Terminal(v1::JobState s) {
  return s == v1::SUCCEEDED || s == v1::FAILED || s == v1::CANCELLED;
}

std::string Tag(const std::string& job_id) {
  return absl::StrCat("[job ", job_id, "] ");
}

}  // namespace

JobTable::JobTable(JobTableOptions options, WorkerRegistry* workers,
                   const Clock* clock)
    : id_prefix_(std::move(options.id_prefix)),
      store_(options.store),
      job_key_(KeyOrNew(std::move(options.job_key))),
      workers_(workers),
      clock_(clock),
      ps_addresses_(std::move(options.ps_addresses)),
      retention_(options.retention) {}

void JobTable::SetShardAddress(int shard, const std::string& address) {
  if (shard >= 0 && shard < num_ps_shards()) ps_addresses_[shard] = address;
}

int64_t JobTable::NowMs() const { return absl::ToUnixMillis(clock_->Now()); }

JobTable::JobEntry* JobTable::Entry(const std::string& id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const JobTable::JobEntry* JobTable::Entry(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

JobTable::JobEntry* JobTable::RankEntry(const std::string& id, int rank,
                                        const std::string& worker_id) {
  JobEntry* e = Entry(id);
  if (e == nullptr || rank < 0 || rank >= e->job.workers_size() ||
      e->job.workers(rank) != worker_id) {
    return nullptr;
  }
  return e;
}

absl::Status JobTable::CheckResumable(const std::string& old) const {
  if (old.empty()) return absl::OkStatus();
  auto it = jobs_.find(old);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("resume_from: no job ", old));
  }
  const v1::Job& j = it->second.job;
  if (j.state() == v1::QUEUED || j.state() == v1::RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat(
        "resume_from: job ", old, " has not ended; cancel it first"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Job> JobTable::Submit(const v1::JobSpec& request,
                                         Decisions* out) {
  absl::StatusOr<v1::JobSpec> spec = ValidateJobSpec(request, num_ps_shards());
  if (!spec.ok()) return spec.status();
  // ValidateJobSpec accepted the model; the parse kept here is the only one
  // placement uses, so a model that does not parse is refused, never placed.
  // Bench jobs have no model.
  absl::StatusOr<MlpSpec> model =
      IsBench(*spec) ? MlpSpec{} : ParseModelSpec(spec->model());
  if (!model.ok()) return model.status();
  if (absl::Status st = CheckResumable(spec->resume_from()); !st.ok()) return st;
  std::string id = absl::StrCat("j-", id_prefix_, next_job_++);
  while (jobs_.count(id) > 0) id = absl::StrCat("j-", id_prefix_, next_job_++);
  JobEntry& e = jobs_[id];
  e.model = *std::move(model);
  e.job.set_id(id);
  *e.job.mutable_spec() = *std::move(spec);
  e.job.set_state(v1::QUEUED);
  e.job.set_submit_time_ms(NowMs());
  e.queued = clock_->Now();
  AppendStateEvent(&e, "queued", out);
  if (absl::Status saved = Save(&e); !saved.ok()) {
    jobs_.erase(id);  // never seen by anyone: the id is simply skipped
    return saved;
  }
  job_order_.push_back(id);
  queue_.push_back(id);
  const v1::JobSpec& s = e.job.spec();
  spdlog::info("{}queued: {} {} workers={} model={} batch={}", Tag(id),
               StrategyName(s.strategy()), SyncModeName(s.mode()), s.workers(),
               s.model(), s.batch_size());
  Reschedule(out);
  v1::Job job = e.job;
  PruneEnded();
  return job;
}

std::string UniqueIdPrefix(absl::Time start, uint32_t random) {
  auto base36 = [](uint64_t v, size_t min_digits) {
    std::string out;
    do {
      out.insert(out.begin(), "0123456789abcdefghijklmnopqrstuvwxyz"[v % 36]);
      v /= 36;
    } while (v > 0 || out.size() < min_digits);
    return out;
  };
  return absl::StrCat(
      base36(static_cast<uint64_t>(absl::ToUnixMillis(start)), 1),
      base36(random % (36 * 36), 2), "-");
}

bool JobTable::Reserves(const JobEntry& e) const {
  return e.backfill_passes >= kMaxBackfillPasses ||
         clock_->Now() - e.queued >= kBackfillReserveAfter;
}

// 1. walk the queue oldest first, dropping entries that are no longer QUEUED;
// 2. a job that fits the idle workers starts (and counts as a pass against
//    the oldest waiting job that could run, the "head");
// 3. the first job that does not fit but could run on the registered
//    workers becomes the head; if it reserves, nothing behind it starts.
void JobTable::Schedule(Decisions* out) {
  Reschedule(out);
  PruneEnded();
}

void JobTable::Reschedule(Decisions* out) {
  const int registered = static_cast<int>(workers_->Live().size());
  JobEntry* head = nullptr;
  for (auto it = queue_.begin(); it != queue_.end();) {
    JobEntry* e = Entry(*it);
    if (e == nullptr || e->job.state() != v1::QUEUED) {
      it = queue_.erase(it);
      continue;
    }
    std::vector<const RegisteredWorker*> picked =
        workers_->PickIdle(e->job.spec().workers());
    if (!picked.empty()) {
      it = queue_.erase(it);
      if (head != nullptr) ++head->backfill_passes;
      Place(e, picked, out);
      continue;
    }
    if (head == nullptr && e->job.spec().workers() <= registered) {
      head = e;
      if (Reserves(*e)) return;
    }
    ++it;
  }
}

void JobTable::Place(JobEntry* e,
                     const std::vector<const RegisteredWorker*>& picked,
                     Decisions* out) {
  const v1::JobSpec& spec = e->job.spec();
  if (spec.device() == v1::DEVICE_CUDA) {
    for (const RegisteredWorker* w : picked) {
      if (w->num_gpus <= 0) {
        EndJob(e, v1::FAILED,
               absl::FailedPreconditionError(absl::StrCat(
                   "job wants device=cuda but worker ", w->id, " (",
                   w->peer_address, ") has no GPU")),
               out);
        return;
      }
    }
  }
  v1::Assignment a = MakeAssignment(*e, picked);
  e->job.mutable_result()->set_num_params(a.num_params());
  e->job.set_state(v1::RUNNING);
  e->job.set_start_time_ms(NowMs());
  e->job.clear_workers();
  e->started = clock_->Now();
  const int n = spec.workers();
  e->done.assign(n, false);
  e->results.assign(n, {});
  e->rank_wall.assign(n, 0);
  e->init_checksums.assign(n, "");
  e->rank_samples_per_second.assign(n, 0);
  for (int r = 0; r < n; ++r) {
    workers_->Assign(picked[r]->id, e->job.id());
    e->job.add_workers(picked[r]->id);
    a.set_rank(r);
    WorkerSend send;
    send.worker_id = picked[r]->id;
    *send.message.mutable_assignment() = a;
    out->sends.push_back(std::move(send));
  }
  const std::string running_on =
      absl::StrCat("running on ", absl::StrJoin(e->job.workers(), ","));
  spdlog::info("{}{}", Tag(e->job.id()), running_on);
  AddStateEvent(e, running_on, out);
}

v1::Assignment JobTable::MakeAssignment(
    const JobEntry& e, const std::vector<const RegisteredWorker*>& picked) const {
  const v1::JobSpec& spec = e.job.spec();
  const size_t num_params = NumParamsOf(e);
  v1::Assignment a;
  a.set_job_id(e.job.id());
  *a.mutable_spec() = spec;
  a.set_world_size(spec.workers());
  a.set_num_params(num_params);
  for (int width : e.model.widths) a.add_layer_widths(width);
  for (const RegisteredWorker* w : picked) a.add_peer_addresses(w->peer_address);
  AddSecrets(e, &a);
  if (UsesPs(spec)) {
    // Shards own no contiguous slice: workers cut their buckets into
    // partitions of <= partition_bytes, partition p on shard p % S.
    for (int s = 0; s < spec.ps_shards(); ++s) {
      v1::PsShardInfo* info = a.add_ps_shards();
      info->set_address(ps_addresses_[s]);
      info->set_partition_bytes(kPsPartitionBytes);
    }
  } else if ((spec.checkpoint_every() > 0 || !spec.resume_from().empty()) &&
             num_ps_shards() > 0) {
    // Ring checkpoints live on shard 0 (worker/sync/ring_checkpoint.h).
    a.add_ps_shards()->set_address(ps_addresses_[0]);
  }
  return a;
}

void JobTable::AddStateEvent(JobEntry* e, const std::string& message,
                             Decisions* out) {
  AppendStateEvent(e, message, out);
  Save(e).IgnoreError();  // logged by Save
}

void JobTable::AppendStateEvent(JobEntry* e, const std::string& message,
                                Decisions* out) {
  v1::JobEvent ev;
  ev.set_kind(v1::JobEvent::STATE);
  ev.set_job_id(e->job.id());
  ev.set_state(e->job.state());
  ev.set_step(e->job.step());
  ev.set_total_steps(e->job.total_steps());
  ev.set_message(message);
  *ev.mutable_job() = e->job;
  e->events.push_back(std::move(ev));
  ++e->seq;
  out->events_changed = true;
}

void JobTable::EndJob(JobEntry* e, v1::JobState state,
                      const absl::Status& status, Decisions* out) {
  if (Terminal(e->job.state())) return;
  const bool was_running = e->job.state() == v1::RUNNING;
  const std::string& id = e->job.id();
  for (v1::WorkerMessage::JobDone& d : e->results) d.clear_trace();
  e->job.set_state(state);
  e->job.set_error(std::string(status.message()));
  e->job.set_error_code(static_cast<int>(status.code()));
  e->job.set_end_time_ms(NowMs());
  ended_.push_back(id);
  store_needs_pruning_ = true;
  if (state == v1::FAILED) {
    spdlog::warn("{}failed: {}", Tag(id), status.ToString());
  } else {
    spdlog::info("{}{}: {}", Tag(id), v1::JobState_Name(state),
                 status.ToString());
  }
  if (was_running) {
    const std::string reason =
        status.ok() ? absl::StrCat("job ", id, " ended") : status.ToString();
    for (int r = 0; r < e->job.workers_size(); ++r) {
      if (e->done[r] || !workers_->IsLive(e->job.workers(r))) continue;
      WorkerSend send;
      send.worker_id = e->job.workers(r);
      send.message.mutable_cancel()->set_job_id(id);
      send.message.mutable_cancel()->set_reason(reason);
      out->sends.push_back(std::move(send));
    }
    if (UsesPs(e->job.spec())) {
      ShardEndJob end;
      end.job_id = id;
      // A job recovered after a restart may name more shards than this
      // server knows.
      const int shards = std::min(e->job.spec().ps_shards(), num_ps_shards());
      end.shard_addresses.assign(ps_addresses_.begin(),
                                 ps_addresses_.begin() + shards);
      end.reason = reason;
      end.world = e->job.spec().workers();
      end.secret = SecretOf(id, end.world);
      out->shard_end_jobs.push_back(std::move(end));
    }
  }
  AddStateEvent(e,
                status.ok() ? v1::JobState_Name(state)
                            : std::string(status.message()),
                out);
}

absl::StatusOr<v1::Job> JobTable::Cancel(const std::string& id,
                                         Decisions* out) {
  JobEntry* e = Entry(id);
  if (e == nullptr) return absl::NotFoundError(absl::StrCat("no job '", id, "'"));
  if (e->job.state() == v1::SUCCEEDED || e->job.state() == v1::FAILED) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id, " already ", v1::JobState_Name(e->job.state())));
  }
  EndJob(e, v1::CANCELLED, absl::CancelledError("cancelled by user"), out);
  Reschedule(out);  // a cancelled head no longer holds the queue
  v1::Job job = e->job;
  PruneEnded();
  return job;
}

void JobTable::HandleProgress(const std::string& worker_id,
                              const v1::WorkerMessage::Progress& p,
                              Decisions* out) {
  JobEntry* e = RankEntry(p.job_id(), p.rank(), worker_id);
  if (e == nullptr || e->job.state() != v1::RUNNING) return;
  e->rank_samples_per_second[p.rank()] = p.samples_per_second();
  CheckInitChecksum(e, p, out);
  if (e->job.state() != v1::RUNNING) {
    PruneEnded();
    return;
  }
  if (p.rank() != 0) return;
  UpdateProgressEvent(e, p, out);
}

void JobTable::CheckInitChecksum(JobEntry* e,
                                 const v1::WorkerMessage::Progress& p,
                                 Decisions* out) {
  if (p.init_checksum().empty() || !e->init_checksums[p.rank()].empty()) return;
  e->init_checksums[p.rank()] = p.init_checksum();
  for (int r = 0; r < e->job.workers_size(); ++r) {
    const std::string& c = e->init_checksums[r];
    if (!c.empty() && c != p.init_checksum()) {
      EndJob(e, v1::FAILED,
             absl::DataLossError(absl::StrCat(
                 "initial parameters differ: rank ", r, " has ", c, ", rank ",
                 p.rank(), " has ", p.init_checksum())),
             out);
      return;
    }
  }
  e->job.mutable_result()->set_init_checksum(p.init_checksum());
}

void JobTable::UpdateProgressEvent(JobEntry* e,
                                   const v1::WorkerMessage::Progress& p,
                                   Decisions* out) {
  e->job.set_step(p.step());
  e->job.set_total_steps(p.total_steps());
  v1::JobEvent& ev = e->progress;
  ev.set_kind(v1::JobEvent::PROGRESS);
  ev.set_job_id(e->job.id());
  ev.set_state(e->job.state());
  ev.set_step(p.step());
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
                               const v1::WorkerMessage::EpochDone& d,
                               Decisions* out) {
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
    if (x.rank() == 0) er.set_test_accuracy(x.test_accuracy());
  }
  er.set_train_loss(loss / ranks.size());
  er.set_seconds(secs);
  *e->job.mutable_result()->add_epochs() = er;
  v1::JobEvent ev;
  ev.set_kind(v1::JobEvent::EPOCH);
  ev.set_job_id(e->job.id());
  ev.set_state(e->job.state());
  ev.set_epoch(d.epoch());
  ev.set_step(e->job.step());
  ev.set_total_steps(e->job.total_steps());
  *ev.mutable_epoch_result() = er;
  if (RoomForEvent(e)) e->events.push_back(std::move(ev));
  ++e->seq;
  e->epochs.erase(d.epoch());
  Save(e).IgnoreError();  // logged by Save
  spdlog::info("{}epoch {}: train loss {:.4f}, test accuracy {:.4f}, {:.2f} s",
               Tag(e->job.id()), er.epoch(), er.train_loss(),
               er.test_accuracy(), er.seconds());
  out->events_changed = true;
}

void JobTable::HandleJobDone(const std::string& worker_id,
                             const v1::WorkerMessage::JobDone& d,
                             Decisions* out) {
  workers_->Release(worker_id, d.job_id());  // idle again
  JobEntry* e = RankEntry(d.job_id(), d.rank(), worker_id);
  if (e != nullptr && !e->done[d.rank()]) {
    e->done[d.rank()] = true;
    e->results[d.rank()] = d;
    if (Terminal(e->job.state())) e->results[d.rank()].clear_trace();
    e->rank_wall[d.rank()] = d.wall_seconds();
    if (e->job.state() == v1::RUNNING && d.code() != 0) {
      RankFailed(e, worker_id, d, out);
    }
    if (e->job.state() == v1::RUNNING &&
        std::all_of(e->done.begin(), e->done.end(), [](bool b) { return b; })) {
      if (e->pending_error.ok()) {
        Finalize(e, out);
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
  std::string message = absl::StrCat("rank ", d.rank(), " (worker ", worker_id,
                                     "): ", d.error());
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
    e->pending_since = clock_->Now();
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
  JobEntry* e = Entry(w->job_id);
  if (e == nullptr || e->job.state() != v1::RUNNING) return;
  int rank = -1;
  for (int r = 0; r < e->job.workers_size(); ++r) {
    if (e->job.workers(r) == w->id) rank = r;
  }
  EndJob(e, v1::FAILED,
         absl::UnavailableError(absl::StrCat("worker ", w->id, " (rank ", rank,
                                             ", ", w->peer_address,
                                             ") lost: ", why)),
         out);
  PruneEnded();
}

void JobTable::ExpireSymptoms(Decisions* out) {
  const absl::Time now = clock_->Now();
  for (auto& [id, e] : jobs_) {
    if (e.job.state() == v1::RUNNING && !e.pending_error.ok() &&
        now - e.pending_since >= kSymptomGrace) {
      const absl::Status pending = e.pending_error;
      EndJob(&e, v1::FAILED, pending, out);
    }
  }
  PruneEnded();
}

size_t JobTable::NumParamsOf(const JobEntry& e) {
  if (!IsBench(e.job.spec())) return NumParams(e.model);
  int64_t largest = 0;
  for (int64_t bytes : e.job.spec().bench().sizes()) {
    largest = std::max(largest, bytes);
  }
  return static_cast<size_t>(largest / 4);
}

void JobTable::Finalize(JobEntry* e, Decisions* out) {
  if (IsBench(e->job.spec())) {
    absl::StatusOr<v1::BenchResult> merged =
        MergeBenchResults(e->job.spec().bench(), e->results);
    if (merged.ok()) *e->job.mutable_result()->mutable_bench() = *merged;
    e->job.mutable_result()->set_wall_seconds(
        absl::ToDoubleSeconds(clock_->Now() - e->started));
    EndJob(e, merged.ok() ? v1::SUCCEEDED : v1::FAILED, merged.status(), out);
    return;
  }
  const int n = e->job.workers_size();
  v1::JobResult* res = e->job.mutable_result();
  double comm = 0, compute = 0, last_loss = 0, max_wall = 0, exposed = 0;
  int64_t samples = 0;
  res->clear_param_checksums();
  res->clear_comm_seconds_per_worker();
  for (int r = 0; r < n; ++r) {
    const v1::WorkerMessage::JobDone& d = e->results[r];
    comm += d.comm_seconds();
    exposed += d.exposed_comm_seconds();
    compute += d.compute_seconds();
    last_loss += d.last_step_loss();
    samples += d.samples();
    max_wall = std::max(max_wall, e->rank_wall[r]);
    res->add_param_checksums(d.param_checksum());
    res->add_comm_seconds_per_worker(d.comm_seconds());
  }
  const v1::JobSpec& spec = e->job.spec();
  res->set_comm_seconds(comm / n);
  res->set_exposed_comm_seconds(exposed / n);
  res->set_device(e->results[0].device());
  res->mutable_bucket_bytes()->CopyFrom(e->results[0].bucket_bytes());
  res->mutable_bucket_algorithms()->CopyFrom(e->results[0].bucket_algorithms());
  res->set_compute_seconds(compute / n);
  res->set_final_train_loss(last_loss / n);
  res->set_test_accuracy(e->results[0].test_accuracy());
  res->set_steps(e->results[0].steps());
  res->set_global_batch(static_cast<int64_t>(spec.batch_size()) * n);
  res->set_ps_shards(spec.strategy() == v1::STRATEGY_PS ? spec.ps_shards() : 0);
  res->set_wall_seconds(absl::ToDoubleSeconds(clock_->Now() - e->started));
  res->set_samples_per_second(max_wall > 0 ? samples / max_wall : 0);
  if (absl::Status same = CheckFinalChecksums(
          *res, spec.strategy() == v1::STRATEGY_RING
                    ? "ring replicas diverged"
                    : "PS ranks ended with different parameters");
      !same.ok()) {
    EndJob(e, v1::FAILED, same, out);
    return;
  }
  e->job.set_step(res->steps());
  KeepTraces(e);
  EndJob(e, v1::SUCCEEDED, absl::OkStatus(), out);
}

const v1::Job* JobTable::Find(const std::string& id) const {
  const JobEntry* e = Entry(id);
  return e == nullptr ? nullptr : &e->job;
}

std::vector<const v1::Job*> JobTable::Jobs() const {
  std::vector<const v1::Job*> jobs;
  jobs.reserve(job_order_.size());
  for (const std::string& id : job_order_) jobs.push_back(&jobs_.at(id).job);
  return jobs;
}

bool JobTable::HasNews(const std::string& id, const WatchCursor& cursor) const {
  const JobEntry* e = Entry(id);
  return e != nullptr && e->seq != cursor.seen_seq;
}

absl::StatusOr<bool> JobTable::ReadEvents(const std::string& id,
                                          WatchCursor* cursor,
                                          std::vector<v1::JobEvent>* events) const {
  const JobEntry* e = Entry(id);
  if (e == nullptr) return absl::NotFoundError(absl::StrCat("no job '", id, "'"));
  cursor->seen_seq = e->seq;
  if (e->progress_seq != cursor->seen_progress) {
    cursor->seen_progress = e->progress_seq;
    events->push_back(e->progress);
  }
  for (; cursor->next_event < e->events.size(); ++cursor->next_event) {
    events->push_back(e->events[cursor->next_event]);
  }
  return Terminal(e->job.state());
}

}  // namespace gradsync
