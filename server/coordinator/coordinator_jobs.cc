// The job life cycle of the Coordinator: scheduling onto idle workers,
// handling worker reports, ending jobs, building results. Every method here
// runs with mu_ held (see coordinator.h).
#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc/grpc_util.h"
#include "common/partition.h"
#include "server/coordinator/coordinator.h"
#include "server/coordinator/coordinator_internal.h"
#include "common/spec/model_spec.h"

namespace gradsync {

using coordinator_internal::NowMs;
using coordinator_internal::LooksLikeSymptom;
using coordinator_internal::Terminal;
using coordinator_internal::Tag;

void Coordinator::AddStateEvent(JobEntry* e, const std::string& message) {
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
  changed_.SignalAll();
}

void Coordinator::Schedule() {
  while (!queue_.empty()) {
    const std::string id = queue_.front();
    JobEntry& e = jobs_[id];
    if (e.job.state() != v1::QUEUED) {
      queue_.pop_front();
      continue;
    }
    const v1::JobSpec& spec = e.job.spec();
    std::vector<Worker*> idle;
    for (auto& [wid, w] : workers_) {
      if (!w.dead && w.job_id.empty() && w.chan != nullptr) idle.push_back(&w);
    }
    if (static_cast<int>(idle.size()) < spec.workers()) return;  // FIFO
    std::sort(idle.begin(), idle.end(),
              [](Worker* a, Worker* b) { return a->order < b->order; });
    idle.resize(spec.workers());
    queue_.pop_front();
    if (spec.device() == v1::DEVICE_CUDA) {
      for (Worker* w : idle) {
        if (w->num_gpus <= 0) {
          e.job.set_state(v1::FAILED);
          e.job.set_error(absl::StrCat(
              "FAILED_PRECONDITION: job wants device=cuda but worker ", w->id,
              " (", w->peer_address, ") has no GPU"));
          e.job.set_end_time_ms(NowMs());
          spdlog::warn("{}{}", Tag(id), e.job.error());
          AddStateEvent(&e, e.job.error());
          break;
        }
      }
      if (e.job.state() == v1::FAILED) continue;
    }
    absl::StatusOr<MlpSpec> model = ParseModelSpec(spec.model());
    const uint64_t num_params = model.ok() ? NumParams(*model) : 0;
    v1::Assignment a;
    a.set_job_id(id);
    *a.mutable_spec() = spec;
    a.set_world_size(spec.workers());
    a.set_num_params(num_params);
    for (Worker* w : idle) a.add_peer_addresses(w->peer_address);
    if (spec.strategy() == v1::STRATEGY_PS) {
      std::vector<Range> parts = PartitionEven(num_params, spec.ps_shards());
      for (int s = 0; s < spec.ps_shards(); ++s) {
        v1::PsShardInfo* info = a.add_ps_shards();
        info->set_address(ps_addresses_[s]);
        info->set_offset(parts[s].begin);
        info->set_count(parts[s].size);
      }
    }
    e.job.mutable_result()->set_num_params(num_params);
    e.job.set_state(v1::RUNNING);
    e.job.set_start_time_ms(NowMs());
    e.job.clear_workers();
    e.started = absl::Now();
    const int n = spec.workers();
    e.done.assign(n, false);
    e.results.assign(n, {});
    e.init_checksums.assign(n, "");
    e.rank_samples_per_second.assign(n, 0);
    for (int r = 0; r < n; ++r) {
      Worker* w = idle[r];
      w->job_id = id;
      e.job.add_workers(w->id);
      a.set_rank(r);
      v1::CoordinatorMessage msg;
      *msg.mutable_assignment() = a;
      Post(w->chan, std::move(msg));
    }
    spdlog::info("{}running on {}", Tag(id), absl::StrJoin(e.job.workers(), ","));
    AddStateEvent(&e, absl::StrCat("running on ", absl::StrJoin(e.job.workers(), ",")));
  }
}

void Coordinator::EndJob(JobEntry* e, v1::JobState state,
                         const std::string& error) {
  if (Terminal(e->job.state())) return;
  const bool was_running = e->job.state() == v1::RUNNING;
  e->job.set_state(state);
  e->job.set_error(error);
  e->job.set_end_time_ms(NowMs());
  if (state == v1::FAILED) {
    spdlog::warn("{}failed: {}", Tag(e->job.id()), error);
  } else {
    spdlog::info("{}{}: {}", Tag(e->job.id()), v1::JobState_Name(state), error);
  }
  if (was_running) {
    for (int r = 0; r < e->job.workers_size(); ++r) {
      if (e->done[r]) continue;
      auto it = workers_.find(e->job.workers(r));
      if (it == workers_.end() || it->second.dead) continue;
      v1::CoordinatorMessage msg;
      msg.mutable_cancel()->set_job_id(e->job.id());
      msg.mutable_cancel()->set_reason(error);
      Post(it->second.chan, std::move(msg));
    }
    if (e->job.spec().strategy() == v1::STRATEGY_PS) {
      std::vector<std::string> shards(
          ps_addresses_.begin(),
          ps_addresses_.begin() + e->job.spec().ps_shards());
      const std::string id = e->job.id();
      Background([shards, id, error] {
        for (const std::string& addr : shards) {
          auto stub = v1::ParameterServer::NewStub(MakeChannel(addr));
          grpc::ClientContext ctx;
          ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
          v1::EndJobRequest req;
          req.set_job_id(id);
          req.set_reason(error.empty() ? absl::StrCat("job ", id, " ended") : error);
          v1::EndJobResponse resp;
          grpc::Status st = stub->EndJob(&ctx, req, &resp);
          if (!st.ok()) {
            spdlog::warn("{}EndJob on shard {}: {}", Tag(id), addr,
                         st.error_message());
          }
        }
      });
    }
  }
  AddStateEvent(e, error.empty() ? v1::JobState_Name(state) : error);
}

void Coordinator::WorkerLost(const std::string& worker_id,
                             const std::string& why) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.dead) return;
  Worker& w = it->second;
  w.dead = true;
  spdlog::warn("worker {} ({}) lost: {}", w.id, w.peer_address, why);
  if (!w.job_id.empty()) {
    auto j = jobs_.find(w.job_id);
    if (j != jobs_.end() && j->second.job.state() == v1::RUNNING) {
      JobEntry& e = j->second;
      int rank = -1;
      for (int r = 0; r < e.job.workers_size(); ++r) {
        if (e.job.workers(r) == w.id) rank = r;
      }
      EndJob(&e, v1::FAILED,
             absl::StrCat("UNAVAILABLE: worker ", w.id, " (rank ", rank, ", ",
                          w.peer_address, ") lost: ", why));
    }
  }
}

void Coordinator::Finalize(JobEntry* e) {
  const int n = e->job.workers_size();
  v1::JobResult* res = e->job.mutable_result();
  double comm = 0, compute = 0, last_loss = 0, max_wall = 0, exposed = 0;
  int64_t samples = 0;
  res->clear_param_checksums();
  res->clear_comm_seconds_per_worker();
  for (int r = 0; r < n; ++r) {
    const auto& d = e->results[r];
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
  res->set_compute_seconds(compute / n);
  res->set_final_train_loss(last_loss / n);
  res->set_test_accuracy(e->results[0].test_accuracy());
  res->set_steps(e->results[0].steps());
  res->set_global_batch(static_cast<int64_t>(spec.batch_size()) * n);
  res->set_ps_shards(spec.strategy() == v1::STRATEGY_PS ? spec.ps_shards() : 0);
  res->set_wall_seconds(absl::ToDoubleSeconds(absl::Now() - e->started));
  res->set_samples_per_second(max_wall > 0 ? samples / max_wall : 0);
  if (spec.strategy() == v1::STRATEGY_RING) {
    for (int r = 1; r < n; ++r) {
      if (res->param_checksums(r) != res->param_checksums(0)) {
        EndJob(e, v1::FAILED,
               absl::StrCat("DATA_LOSS: ring replicas diverged: rank 0 has ",
                            res->param_checksums(0), ", rank ", r, " has ",
                            res->param_checksums(r)));
        return;
      }
    }
  }
  e->job.set_step(res->steps());
  EndJob(e, v1::SUCCEEDED, "");
}

void Coordinator::HandleMessage(const std::string& worker_id,
                                const v1::WorkerMessage& m) {
  auto wit = workers_.find(worker_id);
  if (wit == workers_.end()) return;
  Worker& w = wit->second;
  w.last_seen = absl::Now();
  auto job_of = [&](const std::string& id, int rank) -> JobEntry* {
    auto j = jobs_.find(id);
    if (j == jobs_.end()) return nullptr;
    if (rank < 0 || rank >= j->second.job.workers_size() ||
        j->second.job.workers(rank) != worker_id) {
      return nullptr;
    }
    return &j->second;
  };
  switch (m.msg_case()) {
    case v1::WorkerMessage::kHeartbeat:
      return;
    case v1::WorkerMessage::kProgress: {
      const auto& p = m.progress();
      JobEntry* e = job_of(p.job_id(), p.rank());
      if (e == nullptr || e->job.state() != v1::RUNNING) return;
      e->rank_samples_per_second[p.rank()] = p.samples_per_second();
      if (!p.init_checksum().empty() && e->init_checksums[p.rank()].empty()) {
        e->init_checksums[p.rank()] = p.init_checksum();
        for (int r = 0; r < e->job.workers_size(); ++r) {
          const std::string& c = e->init_checksums[r];
          if (!c.empty() && c != p.init_checksum()) {
            EndJob(e, v1::FAILED,
                   absl::StrCat("DATA_LOSS: initial parameters differ: rank ", r,
                                " has ", c, ", rank ", p.rank(), " has ",
                                p.init_checksum()));
            return;
          }
        }
        e->job.mutable_result()->set_init_checksum(p.init_checksum());
      }
      if (p.rank() != 0) return;
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
      changed_.SignalAll();
      return;
    }
    case v1::WorkerMessage::kEpochDone: {
      const auto& d = m.epoch_done();
      JobEntry* e = job_of(d.job_id(), d.rank());
      if (e == nullptr || e->job.state() != v1::RUNNING) return;
      auto& v = e->epochs[d.epoch()];
      v.push_back(d);
      if (static_cast<int>(v.size()) == e->job.workers_size()) {
        v1::EpochResult er;
        er.set_epoch(d.epoch());
        double loss = 0, secs = 0;
        for (const auto& x : v) {
          loss += x.train_loss();
          secs = std::max(secs, x.seconds());
          if (x.rank() == 0) er.set_test_accuracy(x.test_accuracy());
        }
        er.set_train_loss(loss / v.size());
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
        e->events.push_back(ev);
        ++e->seq;
        e->epochs.erase(d.epoch());
        spdlog::info("{}epoch {}: train loss {:.4f}, test accuracy {:.4f}, {:.2f} s",
                     Tag(e->job.id()), er.epoch(), er.train_loss(),
                     er.test_accuracy(), er.seconds());
        changed_.SignalAll();
      }
      return;
    }
    case v1::WorkerMessage::kJobDone: {
      const auto& d = m.job_done();
      auto j = jobs_.find(d.job_id());
      if (w.job_id == d.job_id()) w.job_id.clear();  // idle again
      JobEntry* e = job_of(d.job_id(), d.rank());
      if (e != nullptr && !e->done[d.rank()]) {
        e->done[d.rank()] = true;
        e->results[d.rank()] = d;
        if (e->rank_wall.empty()) e->rank_wall.assign(e->job.workers_size(), 0);
        e->rank_wall[d.rank()] = d.wall_seconds();
        if (e->job.state() == v1::RUNNING) {
          if (d.code() != 0) {
            const auto code = static_cast<absl::StatusCode>(d.code());
            std::string error =
                absl::StrCat(absl::StatusCodeToString(code), ": rank ", d.rank(),
                             " (worker ", worker_id, "): ", d.error());
            if (LooksLikeSymptom(code)) {
              // Name every rank so that "rank 2" in the message can be read.
              absl::StrAppend(&error, " [ranks:");
              for (int r = 0; r < e->job.workers_size(); ++r) {
                absl::StrAppend(&error, " ", r, "=", e->job.workers(r));
              }
              absl::StrAppend(&error, "]");
              if (e->pending_error.empty()) {
                e->pending_error = error;
                e->pending_since = absl::Now();
              }
            } else {
              EndJob(e, v1::FAILED, error);
            }
          }
          if (e->job.state() == v1::RUNNING &&
              std::all_of(e->done.begin(), e->done.end(),
                          [](bool b) { return b; })) {
            if (e->pending_error.empty()) {
              Finalize(e);
            } else {
              EndJob(e, v1::FAILED, e->pending_error);
            }
          }
        }
      }
      (void)j;
      Schedule();
      return;
    }
    default:
      return;
  }
}

}  // namespace gradsync
