// The job table (see job_table.h): submission, scheduling and placement,
// ending jobs and the event log. What workers report, and the results it
// leads to, is in job_table_reports.cc.
#include "server/coordinator/job_table.h"

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc/grpc_util.h"
#include "common/ps_layout.h"
#include "common/spec/job_spec.h"

namespace gradsync {
namespace {

std::string Tag(const std::string& job_id) { return absl::StrCat("[job ", job_id, "] "); }

}  // namespace

JobTable::JobTable(JobTableOptions options, WorkerRegistry* workers, const Env* env)
    : id_prefix_(std::move(options.id_prefix)),
      job_key_(KeyOrNew(std::move(options.job_key))),
      workers_(workers),
      env_(env),
      ps_addresses_(std::move(options.ps_addresses)),
      history_(options.store),
      retention_(options.retention, &jobs_, &history_),
      queue_(&jobs_, workers, env) {}

void JobTable::SetShardAddress(int shard, const std::string& address) {
  if (shard >= 0 && shard < num_ps_shards()) ps_addresses_[shard] = address;
}

int64_t JobTable::NowMs() const { return absl::ToUnixMillis(env_->Now()); }

JobEntry* JobTable::Entry(const std::string& id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const JobEntry* JobTable::Entry(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

JobEntry* JobTable::RankEntry(const std::string& data_plane_id, int rank,
                              const std::string& worker_id) {
  // A rank of an ended generation is fenced: its reports change nothing.
  const auto [id, generation] = SplitGenerationJobId(data_plane_id);
  JobEntry* e = Entry(id);
  if (e == nullptr || e->job.generation() != generation || e->reforming || rank < 0 ||
      rank >= e->job.workers_size() || e->job.workers(rank) != worker_id) {
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
    return absl::FailedPreconditionError(
        absl::StrCat("resume_from: job ", old, " has not ended; cancel it first"));
  }
  return absl::OkStatus();
}

absl::StatusOr<MlpSpec> JobTable::MlpOf(const v1::JobSpec& spec) {
  // Bench jobs have no model; a TorchScript model's shape is known only to
  // the workers that load it.
  if (IsBench(spec) || IsTorchScriptModel(spec.model())) return MlpSpec{};
  return ParseModelSpec(spec.model());
}

absl::StatusOr<v1::Job> JobTable::Submit(const v1::JobSpec& request, Decisions* out) {
  absl::StatusOr<v1::JobSpec> spec = ValidateJobSpec(request, num_ps_shards());
  if (!spec.ok()) return spec.status();
  // ValidateJobSpec accepted the model; the parse kept here is the only one
  // placement uses, so a model that does not parse is refused, never placed.
  absl::StatusOr<MlpSpec> model = MlpOf(*spec);
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
  e.queued = env_->Now();
  AppendStateEvent(&e, "queued", out);
  if (absl::Status saved = Save(&e); !saved.ok()) {
    jobs_.erase(id);  // never seen by anyone: the id is simply skipped
    return saved;
  }
  job_order_.push_back(id);
  queue_.Push(id);
  const v1::JobSpec& s = e.job.spec();
  spdlog::info("{}queued: {} {} workers={} model={} batch={}", Tag(id),
               StrategyName(s.strategy()), SyncModeName(s.mode()), s.workers(), s.model(),
               s.batch_size());
  Reschedule(out);
  v1::Job job = e.job;
  PruneEnded();
  return job;
}

bool IsTerminal(v1::JobState s) {
  return s == v1::SUCCEEDED || s == v1::FAILED || s == v1::CANCELLED;
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
  return absl::StrCat(base36(static_cast<uint64_t>(absl::ToUnixMillis(start)), 1),
                      base36(random % (36 * 36), 2), "-");
}

void JobTable::Schedule(Decisions* out) {
  Reschedule(out);
  PruneEnded();
}

void JobTable::Reschedule(Decisions* out) {
  // A re-forming elastic job goes first; while one waits, nothing queued
  // takes the workers it waits for.
  if (PlaceReforming(out)) {
    SayWhatQueuedJobsWaitFor(out);
    return;
  }
  queue_.Schedule(
      [this, out](JobEntry* e, const std::vector<const RegisteredWorker*>& picked) {
        Place(e, picked, out);
      });
  SayWhatQueuedJobsWaitFor(out);
}

void JobTable::SayWhatQueuedJobsWaitFor(Decisions* out) {
  const std::vector<const RegisteredWorker*> live = workers_->Live();
  const int idle = static_cast<int>(
      std::count_if(live.begin(), live.end(),
                    [](const RegisteredWorker* w) { return w->job_id.empty(); }));
  for (const std::string& id : queue_.ids()) {
    JobEntry* e = Entry(id);
    if (e == nullptr || e->job.state() != v1::QUEUED) continue;
    const int wanted = e->job.spec().workers();
    const std::string text =
        absl::StrCat("needs ", wanted, wanted == 1 ? " worker, " : " workers, ",
                     live.size(), " registered, ", idle, " idle");
    if (text == e->job.waiting_for()) continue;
    e->job.set_waiting_for(text);
    if (retention_.RoomForEvent(e)) AppendStateEvent(e, text, out);
  }
}

void JobTable::Place(JobEntry* e, const std::vector<const RegisteredWorker*>& picked,
                     Decisions* out) {
  const v1::JobSpec& spec = e->job.spec();
  if (spec.device() == v1::DEVICE_CUDA) {
    for (const RegisteredWorker* w : picked) {
      if (w->num_gpus <= 0) {
        EndJob(e, v1::FAILED,
               absl::FailedPreconditionError(
                   absl::StrCat("job wants device=cuda but worker ", w->id, " (",
                                w->peer_address, ") has no GPU")),
               out);
        return;
      }
    }
  }
  if (e->job.state() == v1::QUEUED) PickPsPartitions(e, picked);
  v1::Assignment a = MakeAssignment(*e, picked);
  e->job.mutable_result()->set_num_params(a.num_params());
  const bool first = e->job.state() == v1::QUEUED;
  e->job.set_state(v1::RUNNING);
  e->job.clear_waiting_for();
  e->job.clear_workers();
  if (first) {
    e->job.set_start_time_ms(NowMs());
    e->started = env_->Now();
  }
  e->reforming = false;
  const int n = static_cast<int>(picked.size());
  e->done.assign(n, false);
  e->results.assign(n, {});
  e->rank_wall.assign(n, 0);
  e->init_checksums.assign(n, "");
  e->rank_samples_per_second.assign(n, 0);
  e->curves.Start(n);
  e->stragglers.Start(n);
  for (int r = 0; r < n; ++r) {
    workers_->Assign(picked[r]->id, a.job_id());
    e->job.add_workers(picked[r]->id);
    a.set_rank(r);
    WorkerSend send;
    send.worker_id = picked[r]->id;
    *send.message.mutable_assignment() = a;
    out->sends.push_back(std::move(send));
  }
  std::string running_on =
      absl::StrCat("running on ", absl::StrJoin(e->job.workers(), ","));
  if (spec.elastic()) {
    Generations(&e->job).Start(NowMs());
    if (e->job.generation() > 0) {
      const int from = Generations::Committed(e->job);
      running_on = absl::StrCat(
          "generation ", e->job.generation(), " ", running_on, " (", n, " of ",
          spec.workers(), " workers), ",
          from < 0 ? "from the start (no generation committed a checkpoint)"
                   : absl::StrCat("from the checkpoint of generation ", from));
    }
  }
  spdlog::info("{}{}", Tag(e->job.id()), running_on);
  AddStateEvent(e, running_on, out);
}

void JobTable::PickPsPartitions(JobEntry* e,
                                const std::vector<const RegisteredWorker*>& picked) {
  v1::JobSpec* spec = e->job.mutable_spec();
  if (!UsesPs(*spec) || IsBench(*spec) || spec->ps_partition_bytes() != 0) return;
  std::vector<std::string> addresses;
  for (const RegisteredWorker* w : picked) addresses.push_back(w->peer_address);
  const bool one_host = OnOneHost(addresses);
  const size_t params = NumParams(e->model);  // 0: a TorchScript model
  if (params > 0) {
    spec->set_ps_partition_bytes(static_cast<int64_t>(PickPsPartitionBytes(
        params * sizeof(float), spec->ps_shards(), spec->workers(), one_host)));
  } else if (one_host) {
    spec->set_ps_partition_bytes(static_cast<int64_t>(kPreferredPsPartitionBytes));
  }
}

v1::Assignment JobTable::MakeAssignment(
    const JobEntry& e, const std::vector<const RegisteredWorker*>& picked) const {
  const v1::JobSpec& spec = e.job.spec();
  const size_t num_params = NumParamsOf(e);
  v1::Assignment a;
  a.set_job_id(GenerationJobId(e.job.id(), e.job.generation()));
  *a.mutable_spec() = spec;
  a.set_world_size(static_cast<int>(picked.size()));
  if (spec.elastic()) {
    a.set_generation(e.job.generation());
    a.set_global_batch(int64_t{spec.workers()} * spec.batch_size());
    a.set_checkpoint_at_start(true);
  }
  a.set_num_params(num_params);
  for (int width : e.model.widths) a.add_layer_widths(width);
  for (const RegisteredWorker* w : picked) {
    a.add_peer_addresses(w->peer_address);
    a.add_bulk_peer_addresses(w->bulk_peer_address);
  }
  AddSecrets(e, &a);
  if (UsesPs(spec)) {
    // Shards own no contiguous slice: workers cut their buckets into
    // partitions of <= partition_bytes, partition p on shard p % S; 0 (a
    // bench, a TorchScript model): they pick it (PickPsPartitionBytes).
    const int64_t partition = spec.ps_partition_bytes();
    for (int s = 0; s < spec.ps_shards(); ++s) {
      v1::PsShardInfo* info = a.add_ps_shards();
      info->set_address(ps_addresses_[s]);
      info->set_partition_bytes(partition);
    }
  } else if ((spec.checkpoint_every() > 0 || !spec.resume_from().empty()) &&
             num_ps_shards() > 0) {
    // Ring checkpoints live on shard 0 (worker/sync/allreduce_checkpoint.h).
    a.add_ps_shards()->set_address(ps_addresses_[0]);
  }
  return a;
}

void JobTable::AddStateEvent(JobEntry* e, const std::string& message, Decisions* out) {
  AppendStateEvent(e, message, out);
  Save(e).IgnoreError();  // logged by Save
}

void JobTable::AppendStateEvent(JobEntry* e, const std::string& message, Decisions* out) {
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

void JobTable::EndJob(JobEntry* e, v1::JobState state, const absl::Status& status,
                      Decisions* out) {
  if (IsTerminal(e->job.state())) return;
  const bool was_running = e->job.state() == v1::RUNNING;
  const std::string& id = e->job.id();
  for (v1::WorkerMessage::JobDone& d : e->results) d.clear_trace();
  e->job.set_state(state);
  e->job.clear_waiting_for();
  e->job.set_error(std::string(status.message()));
  e->job.set_error_code(static_cast<int>(status.code()));
  e->job.set_end_time_ms(NowMs());
  retention_.Ended(id);
  if (state == v1::FAILED) {
    spdlog::warn("{}failed: {}", Tag(id), status.ToString());
  } else {
    spdlog::info("{}{}: {}", Tag(id), v1::JobState_Name(state), status.ToString());
  }
  if (was_running) {
    const std::string reason =
        status.ok() ? absl::StrCat("job ", id, " ended") : status.ToString();
    // A re-forming job's last generation was ended on its shards already.
    StopGeneration(e, reason, /*end_on_shards=*/!e->reforming, out);
  }
  e->reforming = false;
  AddStateEvent(e, status.ok() ? v1::JobState_Name(state) : std::string(status.message()),
                out);
}

void JobTable::StopGeneration(JobEntry* e, const std::string& reason, bool end_on_shards,
                              Decisions* out) {
  const std::string data_plane_id = GenerationJobId(e->job.id(), e->job.generation());
  for (int r = 0; r < e->job.workers_size(); ++r) {
    if (e->done[r] || !workers_->IsLive(e->job.workers(r))) continue;
    WorkerSend send;
    send.worker_id = e->job.workers(r);
    send.message.mutable_cancel()->set_job_id(data_plane_id);
    send.message.mutable_cancel()->set_reason(reason);
    out->sends.push_back(std::move(send));
  }
  if (!end_on_shards || !UsesPs(e->job.spec())) return;
  ShardEndJob end;
  end.job_id = data_plane_id;
  // A job recovered after a restart may name more shards than this server
  // knows.
  const int shards = std::min(e->job.spec().ps_shards(), num_ps_shards());
  end.shard_addresses.assign(ps_addresses_.begin(), ps_addresses_.begin() + shards);
  end.reason = reason;
  end.world = e->job.workers_size() > 0 ? e->job.workers_size() : e->job.spec().workers();
  end.secret = SecretOf(data_plane_id, end.world);
  out->shard_end_jobs.push_back(std::move(end));
}

absl::StatusOr<v1::Job> JobTable::Cancel(const std::string& id, Decisions* out) {
  JobEntry* e = Entry(id);
  if (e == nullptr) return absl::NotFoundError(absl::StrCat("no job '", id, "'"));
  if (e->job.state() == v1::SUCCEEDED || e->job.state() == v1::FAILED) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " already ", v1::JobState_Name(e->job.state())));
  }
  EndJob(e, v1::CANCELLED, absl::CancelledError("cancelled by user"), out);
  Reschedule(out);  // a cancelled head no longer holds the queue
  v1::Job job = e->job;
  PruneEnded();
  return job;
}

size_t JobTable::NumParamsOf(const JobEntry& e) {
  if (!IsBench(e.job.spec())) return NumParams(e.model);
  int64_t largest = 0;
  for (int64_t bytes : e.job.spec().bench().sizes()) {
    largest = std::max(largest, bytes);
  }
  return static_cast<size_t>(largest / 4);
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

absl::StatusOr<bool> JobTable::ReadEvents(const std::string& id, WatchCursor* cursor,
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
  return IsTerminal(e->job.state());
}

}  // namespace gradsync
