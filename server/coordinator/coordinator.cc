#include "server/coordinator/coordinator.h"

#include <algorithm>
#include <numeric>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc/grpc_util.h"
#include "server/coordinator/coordinator_internal.h"
#include "common/spec/job_spec.h"

namespace gradsync {

using coordinator_internal::NowMs;
using coordinator_internal::kSymptomGrace;
using coordinator_internal::Terminal;
using coordinator_internal::Tag;

namespace {

// A Join stream must send Register within this long.
constexpr absl::Duration kRegisterTimeout = absl::Seconds(10);

}  // namespace

Coordinator::Coordinator(CoordinatorOptions options)
    : options_(std::move(options)), ps_addresses_(options_.ps_addresses) {
  // Job ids must not repeat across coordinator restarts: long-lived workers
  // and PS shards remember ended jobs by id. "j-<start time, base 36>-<n>".
  uint64_t t = static_cast<uint64_t>(absl::ToUnixSeconds(absl::Now()));
  std::string b36;
  while (t > 0) {
    b36.insert(b36.begin(), "0123456789abcdefghijklmnopqrstuvwxyz"[t % 36]);
    t /= 36;
  }
  id_prefix_ = b36 + "-";
  monitor_ = std::thread([this] { MonitorLoop(); });
  background_thread_ = std::thread([this] { BackgroundLoop(); });
}

Coordinator::~Coordinator() {
  Shutdown();
  if (monitor_.joinable()) monitor_.join();
  if (background_thread_.joinable()) background_thread_.join();
}

void Coordinator::SetShardZeroAddress(const std::string& address) {
  absl::MutexLock lock(&mu_);
  if (!ps_addresses_.empty()) ps_addresses_[0] = address;
}

void Coordinator::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (shutdown_) return;
  shutdown_ = true;
  for (auto& [id, w] : workers_) {
    if (w.ctx != nullptr) w.ctx->TryCancel();
  }
  for (auto& [ctx, since] : unregistered_) ctx->TryCancel();
  changed_.SignalAll();
}

void Coordinator::Post(const std::shared_ptr<WriteChannel>& chan,
                       v1::CoordinatorMessage msg) {
  if (chan == nullptr) return;
  absl::MutexLock lock(&chan->mu);
  if (!chan->closed) chan->queue.push_back(std::move(msg));
}

// One per worker session: the only thread that writes to its stream, so a
// worker that stops reading stalls nobody but itself.
void Coordinator::WriterLoop(std::shared_ptr<WriteChannel> chan) {
  while (true) {
    v1::CoordinatorMessage msg;
    {
      absl::MutexLock lock(&chan->mu);
      auto ready = [&chan]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return chan->closed || !chan->queue.empty();
      };
      chan->mu.Await(absl::Condition(&ready));
      if (chan->closed) return;
      msg = std::move(chan->queue.front());
      chan->queue.pop_front();
    }
    // A failed write means the stream is gone; its Join handler notices.
    chan->stream->Write(msg);
  }
}

void Coordinator::Background(std::function<void()> fn) {
  background_.push_back(std::move(fn));
}

void Coordinator::BackgroundLoop() {
  while (true) {
    std::function<void()> fn;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Coordinator* c) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return c->shutdown_ || !c->background_.empty();
          },
          this));
      if (background_.empty()) return;  // shutdown and drained
      fn = std::move(background_.front());
      background_.pop_front();
    }
    fn();
  }
}

void Coordinator::MonitorLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(
              absl::Condition(
                  +[](bool* s) { return *s; }, &shutdown_),
              absl::Milliseconds(500))) {
        return;
      }
      const absl::Time now = absl::Now();
      std::vector<std::string> expired;
      for (auto& [id, w] : workers_) {
        if (!w.dead && now - w.last_seen > options_.heartbeat_timeout) {
          expired.push_back(id);
        }
      }
      for (const std::string& id : expired) {
        Worker& w = workers_[id];
        if (w.ctx != nullptr) w.ctx->TryCancel();
        WorkerLost(id,
                   absl::StrCat("no heartbeat for ",
                                absl::FormatDuration(now - w.last_seen)));
      }
      for (auto& [ctx, since] : unregistered_) {
        if (now - since > kRegisterTimeout) ctx->TryCancel();
      }
      for (auto& [id, e] : jobs_) {
        if (e.job.state() == v1::RUNNING && !e.pending_error.empty() &&
            now - e.pending_since >= kSymptomGrace) {
          EndJob(&e, v1::FAILED, e.pending_error);
        }
      }
    }
  }
}

grpc::Status Coordinator::SubmitJob(grpc::ServerContext*,
                                    const v1::SubmitJobRequest* req,
                                    v1::Job* resp) {
  int shards;
  {
    absl::MutexLock lock(&mu_);
    shards = static_cast<int>(ps_addresses_.size());
  }
  absl::StatusOr<v1::JobSpec> spec = ValidateJobSpec(req->spec(), shards);
  if (!spec.ok()) return ToGrpcStatus(spec.status());
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return grpc::Status(grpc::UNAVAILABLE, "shutting down");
    const std::string id = absl::StrCat("j-", id_prefix_, next_job_++);
    JobEntry& e = jobs_[id];
    e.job.set_id(id);
    *e.job.mutable_spec() = *spec;
    e.job.set_state(v1::QUEUED);
    e.job.set_submit_time_ms(NowMs());
    job_order_.push_back(id);
    queue_.push_back(id);
    spdlog::info("{}queued: {} {} workers={} model={} batch={}", Tag(id),
                 StrategyName(spec->strategy()), SyncModeName(spec->mode()),
                 spec->workers(),
                 spec->model(), spec->batch_size());
    AddStateEvent(&e, "queued");
    Schedule();
    *resp = e.job;
  }
  return grpc::Status::OK;
}

grpc::Status Coordinator::Join(grpc::ServerContext* ctx, Stream* stream) {
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return grpc::Status(grpc::UNAVAILABLE, "shutting down");
    unregistered_[ctx] = absl::Now();
  }
  v1::WorkerMessage first;
  const bool got = stream->Read(&first);
  {
    absl::MutexLock lock(&mu_);
    unregistered_.erase(ctx);
  }
  if (!got) return grpc::Status::CANCELLED;
  if (!first.has_register_() || first.register_().worker_id().empty() ||
      first.register_().peer_address().empty()) {
    return grpc::Status(grpc::INVALID_ARGUMENT,
                        "first Join message must be Register with worker_id "
                        "and peer_address");
  }
  const std::string id = first.register_().worker_id();
  auto chan = std::make_shared<WriteChannel>();
  chan->stream = stream;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return grpc::Status(grpc::UNAVAILABLE, "shutting down");
    auto it = workers_.find(id);
    if (it != workers_.end() && !it->second.dead) {
      return grpc::Status(grpc::ALREADY_EXISTS,
                          absl::StrCat("worker id ", id, " is already joined"));
    }
    Worker& w = workers_[id];
    w = Worker{};
    w.id = id;
    w.peer_address = first.register_().peer_address();
    w.num_gpus = first.register_().num_gpus();
    w.order = next_worker_order_++;
    w.last_seen = absl::Now();
    w.ctx = ctx;
    w.chan = chan;
    v1::CoordinatorMessage msg;
    msg.mutable_registered()->set_worker_id(id);
    Post(chan, std::move(msg));
    spdlog::info("worker {} joined (peer {}, {} GPUs)", id, w.peer_address,
                 w.num_gpus);
  }
  std::thread writer([chan] { WriterLoop(chan); });
  {
    absl::MutexLock lock(&mu_);
    Schedule();
  }
  v1::WorkerMessage m;
  while (stream->Read(&m)) {
    {
      absl::MutexLock lock(&mu_);
      auto it = workers_.find(id);
      if (it == workers_.end() || it->second.dead || it->second.ctx != ctx) break;
      HandleMessage(id, m);
    }
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = workers_.find(id);
    if (it != workers_.end() && it->second.ctx == ctx) {
      WorkerLost(id,
                 ctx->IsCancelled()
                     ? "its session broke (process exited or connection lost)"
                     : "it closed its session");
      it->second.chan = nullptr;
      it->second.ctx = nullptr;
    }
  }
  {
    absl::MutexLock wl(&chan->mu);
    chan->closed = true;
  }
  // Unblocks a Write to a worker that stopped reading; the writer must be
  // gone before this handler returns and the stream is destroyed.
  ctx->TryCancel();
  writer.join();
  return grpc::Status::OK;
}

grpc::Status Coordinator::GetJob(grpc::ServerContext*, const v1::GetJobRequest* req,
                                 v1::Job* resp) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(req->id());
  if (it == jobs_.end()) {
    return grpc::Status(grpc::NOT_FOUND, absl::StrCat("no job '", req->id(), "'"));
  }
  *resp = it->second.job;
  return grpc::Status::OK;
}

grpc::Status Coordinator::ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*,
                                   v1::ListJobsResponse* resp) {
  absl::MutexLock lock(&mu_);
  for (const std::string& id : job_order_) *resp->add_jobs() = jobs_[id].job;
  std::vector<const Worker*> ws;
  for (const auto& [id, w] : workers_) {
    if (!w.dead) ws.push_back(&w);
  }
  std::sort(ws.begin(), ws.end(),
            [](const Worker* a, const Worker* b) { return a->order < b->order; });
  for (const Worker* w : ws) {
    v1::WorkerInfo* info = resp->add_workers();
    info->set_id(w->id);
    info->set_peer_address(w->peer_address);
    info->set_state(w->job_id.empty() ? "idle" : "busy");
    info->set_job_id(w->job_id);
    info->set_num_gpus(w->num_gpus);
  }
  resp->set_ps_shards(static_cast<int>(ps_addresses_.size()));
  return grpc::Status::OK;
}

grpc::Status Coordinator::CancelJob(grpc::ServerContext*,
                                    const v1::CancelJobRequest* req,
                                    v1::Job* resp) {
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(req->id());
    if (it == jobs_.end()) {
      return grpc::Status(grpc::NOT_FOUND, absl::StrCat("no job '", req->id(), "'"));
    }
    JobEntry& e = it->second;
    if (e.job.state() == v1::SUCCEEDED || e.job.state() == v1::FAILED) {
      *resp = e.job;
      return grpc::Status(grpc::FAILED_PRECONDITION,
                          absl::StrCat("job ", req->id(), " already ",
                                       v1::JobState_Name(e.job.state())));
    }
    EndJob(&e, v1::CANCELLED, "cancelled by user");
    *resp = e.job;
  }
  return grpc::Status::OK;
}

grpc::Status Coordinator::WatchJob(grpc::ServerContext* ctx,
                                   const v1::WatchJobRequest* req,
                                   grpc::ServerWriter<v1::JobEvent>* writer) {
  size_t next_event = 0;
  int64_t seen_progress = 0;
  int64_t seen_seq = -1;
  while (true) {
    std::vector<v1::JobEvent> batch;
    bool finished = false;
    {
      absl::MutexLock lock(&mu_);
      auto it = jobs_.find(req->id());
      if (it == jobs_.end()) {
        return grpc::Status(grpc::NOT_FOUND,
                            absl::StrCat("no job '", req->id(), "'"));
      }
      if (it->second.seq == seen_seq && !shutdown_) {
        changed_.WaitWithTimeout(&mu_, absl::Milliseconds(500));
      }
      if (shutdown_) return grpc::Status(grpc::UNAVAILABLE, "server shutting down");
      JobEntry& e = jobs_[req->id()];
      seen_seq = e.seq;
      if (e.progress_seq != seen_progress) {
        seen_progress = e.progress_seq;
        batch.push_back(e.progress);
      }
      for (; next_event < e.events.size(); ++next_event) {
        batch.push_back(e.events[next_event]);
      }
      finished = Terminal(e.job.state());
    }
    for (const v1::JobEvent& ev : batch) {
      if (!writer->Write(ev)) return grpc::Status::CANCELLED;
    }
    if (finished) return grpc::Status::OK;
    if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
  }
}

}  // namespace gradsync
