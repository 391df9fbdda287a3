// The Coordinator's gRPC façade (see coordinator.h): the RPCs, worker
// sessions and their writer threads, the monitor and background threads.
// Decisions about jobs are the JobTable's; this file carries them out.
#include "server/coordinator/coordinator.h"

#include <random>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"

namespace gradsync {
namespace {

// A Join stream must send Register within this long.
// How often the monitor looks at heartbeats and held errors.
constexpr absl::Duration kMonitorPeriod = absl::Milliseconds(500);
// A WatchJob stream re-checks for cancellation at least this often.
constexpr absl::Duration kWatchPoll = absl::Milliseconds(500);
// Deadline of one ParameterServer.EndJob call.
constexpr absl::Duration kEndJobDeadline = absl::Seconds(5);

// Job ids must not repeat across coordinator restarts: long-lived workers and
// PS shards remember ended jobs by id. Ids are "j-<start ms + random>-<n>".
JobTableOptions MakeJobTableOptions(const CoordinatorOptions& options, absl::Time start) {
  JobTableOptions table;
  table.ps_addresses = options.ps_addresses;
  table.id_prefix = UniqueIdPrefix(start, std::random_device{}());
  table.store = options.store;
  table.retention = options.retention;
  table.job_key = options.job_key;
  return table;
}

grpc::Status ShuttingDown() { return grpc::Status(grpc::UNAVAILABLE, "shutting down"); }

}  // namespace

Coordinator::Coordinator(CoordinatorOptions options, const Env* env)
    : options_(std::move(options)),
      env_(env),
      jobs_(MakeJobTableOptions(options_, env_->Now()), &workers_, env_) {
  session_slots_ = {0, options_.max_streams, "Join/WatchJob", "--max_streams"};
  blob_slots_ = {0, options_.max_blob_streams, "PutBlob/GetBlob", "--max_blob_streams"};
  monitor_ = std::thread([this] { MonitorLoop(); });
  background_thread_ = std::thread([this] { BackgroundLoop(); });
}

Coordinator::~Coordinator() {
  Shutdown();
  if (monitor_.joinable()) monitor_.join();
  if (background_thread_.joinable()) background_thread_.join();
}

absl::Status Coordinator::RecoverJobs() {
  absl::MutexLock lock(&mu_);
  Decisions d;
  absl::Status st = jobs_.Recover(&d);
  Apply(std::move(d));
  return st;
}

void Coordinator::SetShardZeroAddress(const std::string& address) {
  absl::MutexLock lock(&mu_);
  jobs_.SetShardAddress(0, address);
}

void Coordinator::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (shutdown_) return;
  shutdown_ = true;
  for (auto& [id, session] : sessions_) session.ctx->TryCancel();
  for (auto& [ctx, since] : unregistered_) ctx->TryCancel();
  for (auto& [ctx, last] : uploads_) ctx->TryCancel();
  changed_.SignalAll();
}

// ------------------------------------------------------ sessions and threads

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
      chan->mu.Await(absl::Condition(chan.get(), &WriteChannel::Ready));
      if (chan->closed) return;
      msg = std::move(chan->queue.front());
      chan->queue.pop_front();
    }
    // A failed write means the stream is gone; its Join handler notices.
    chan->stream->Write(msg);
  }
}

void Coordinator::Apply(Decisions d) {
  for (WorkerSend& send : d.sends) {
    auto it = sessions_.find(send.worker_id);
    if (it != sessions_.end()) Post(it->second.chan, std::move(send.message));
  }
  for (ShardEndJob& end : d.shard_end_jobs) {
    background_.push_back(std::move(end));
  }
  if (d.events_changed) changed_.SignalAll();
}

void Coordinator::EndJobOnShards(const ShardEndJob& end) {
  for (const std::string& addr : end.shard_addresses) {
    // Shard 0 of a server that has not bound yet: a job recovered after a
    // restart, and that shard restarted with the coordinator (holds nothing).
    if (addr.empty()) continue;
    auto stub = v1::ParameterServer::NewStub(MakeChannel(addr));
    grpc::ClientContext ctx;
    // A gRPC deadline is real time: the real Env's, whatever env_ is.
    ctx.set_deadline(ToChrono(Env::Default()->Now() + kEndJobDeadline));
    ctx.AddMetadata(kJobWorldMetadata, std::to_string(end.world));
    ctx.AddMetadata(kJobSecretMetadata, end.secret);
    v1::EndJobRequest req;
    req.set_job_id(end.job_id);
    req.set_reason(end.reason);
    v1::EndJobResponse resp;
    grpc::Status st = stub->EndJob(&ctx, req, &resp);
    if (!st.ok()) {
      spdlog::warn("[job {}] EndJob on shard {}: {}", end.job_id, addr,
                   st.error_message());
    }
  }
}

void Coordinator::BackgroundLoop() {
  while (true) {
    ShardEndJob end;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &Coordinator::BackgroundReady));
      if (background_.empty()) return;  // shutdown and drained
      end = std::move(background_.front());
      background_.pop_front();
    }
    EndJobOnShards(end);
  }
}

void Coordinator::MonitorLoop() {
  while (true) {
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&shutdown_), kMonitorPeriod)) {
      return;
    }
    MonitorOnce();
  }
}

void Coordinator::MonitorOnce() {
  const absl::Time now = env_->Now();
  Decisions d;
  for (const std::string& id : workers_.Expired(now, options_.heartbeat_timeout)) {
    const absl::Duration silent = now - workers_.Find(id)->last_seen;
    auto session = sessions_.find(id);
    if (session != sessions_.end()) session->second.ctx->TryCancel();
    jobs_.WorkerLost(id, absl::StrCat("no heartbeat for ", absl::FormatDuration(silent)),
                     &d);
  }
  for (auto& [ctx, since] : unregistered_) {
    if (now - since > options_.register_timeout) ctx->TryCancel();
  }
  for (auto& [ctx, last] : uploads_) {
    if (now - last > options_.blob_idle_timeout) ctx->TryCancel();
  }
  jobs_.ExpireSymptoms(&d);
  workers_.ForgetDead(now, options_.dead_worker_grace);
  Apply(std::move(d));
}

// ------------------------------------------------------------------- Join

grpc::Status Coordinator::JoinUnguarded(grpc::ServerContext* ctx, Stream* stream) {
  v1::WorkerMessage first;
  grpc::Status st = AwaitRegister(ctx, stream, &first);
  if (!st.ok()) return st;
  const std::string id = first.register_().worker_id();
  auto chan = std::make_shared<WriteChannel>();
  chan->stream = stream;
  st = OpenSession(ctx, first.register_(), chan);
  if (!st.ok()) return st;
  std::thread writer([chan] { WriterLoop(chan); });
  ServeSession(ctx, id, stream);
  CloseSession(ctx, id);
  {
    absl::MutexLock lock(&chan->mu);
    chan->closed = true;
  }
  // Unblocks a Write to a worker that stopped reading; the writer must be
  // gone before this handler returns and the stream is destroyed.
  ctx->TryCancel();
  writer.join();
  return grpc::Status::OK;
}

grpc::Status Coordinator::AwaitRegister(grpc::ServerContext* ctx, Stream* stream,
                                        v1::WorkerMessage* first) {
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return ShuttingDown();
    unregistered_[ctx] = env_->Now();
  }
  const bool got = stream->Read(first);
  {
    absl::MutexLock lock(&mu_);
    unregistered_.erase(ctx);
  }
  if (!got) return grpc::Status::CANCELLED;
  if (!first->has_register_() || first->register_().worker_id().empty() ||
      first->register_().peer_address().empty()) {
    return grpc::Status(grpc::INVALID_ARGUMENT,
                        "first Join message must be Register with worker_id "
                        "and peer_address");
  }
  return grpc::Status::OK;
}

grpc::Status Coordinator::OpenSession(grpc::ServerContext* ctx,
                                      const v1::WorkerMessage::Register& reg,
                                      const std::shared_ptr<WriteChannel>& chan) {
  absl::MutexLock lock(&mu_);
  if (shutdown_) return ShuttingDown();
  absl::Status st = workers_.Register(reg.worker_id(), reg.peer_address(), reg.num_gpus(),
                                      env_->Now(), reg.bulk_peer_address());
  if (!st.ok()) return ToGrpcStatus(st);
  sessions_[reg.worker_id()] = Session{ctx, chan};
  v1::CoordinatorMessage msg;
  msg.mutable_registered()->set_worker_id(reg.worker_id());
  Post(chan, std::move(msg));
  spdlog::info("worker {} joined (peer {}, {} GPUs)", reg.worker_id(), reg.peer_address(),
               reg.num_gpus());
  Decisions d;
  jobs_.Schedule(&d);
  Apply(std::move(d));
  return grpc::Status::OK;
}

void Coordinator::ServeSession(grpc::ServerContext* ctx, const std::string& id,
                               Stream* stream) {
  v1::WorkerMessage m;
  while (stream->Read(&m)) {
    absl::MutexLock lock(&mu_);
    auto session = sessions_.find(id);
    if (session == sessions_.end() || session->second.ctx != ctx ||
        !workers_.IsLive(id)) {
      return;  // declared dead, or replaced by a newer session
    }
    HandleMessage(id, m);
  }
}

void Coordinator::CloseSession(grpc::ServerContext* ctx, const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto session = sessions_.find(id);
  if (session == sessions_.end() || session->second.ctx != ctx) return;
  Decisions d;
  jobs_.WorkerLost(id,
                   ctx->IsCancelled()
                       ? "its session broke (process exited or connection lost)"
                       : "it closed its session",
                   &d);
  sessions_.erase(session);
  Apply(std::move(d));
}

void Coordinator::HandleMessage(const std::string& id, const v1::WorkerMessage& m) {
  workers_.Touch(id, env_->Now());
  Decisions d;
  switch (m.msg_case()) {
    case v1::WorkerMessage::kProgress:
      jobs_.HandleProgress(id, m.progress(), &d);
      break;
    case v1::WorkerMessage::kEpochDone:
      jobs_.HandleEpochDone(id, m.epoch_done(), &d);
      break;
    case v1::WorkerMessage::kJobDone:
      jobs_.HandleJobDone(id, m.job_done(), &d);
      break;
    case v1::WorkerMessage::kStall:
      jobs_.HandleStall(id, m.stall(), &d);
      break;
    default:  // a heartbeat: being heard from is all it says
      break;
  }
  Apply(std::move(d));
}

// ------------------------------------------------------------------- RPCs

grpc::Status Coordinator::SubmitJobUnguarded(grpc::ServerContext*,
                                             const v1::SubmitJobRequest* req,
                                             v1::Job* resp) {
  if (grpc::Status st = CheckUploaded(req->spec()); !st.ok()) return st;
  absl::MutexLock lock(&mu_);
  if (shutdown_) return ShuttingDown();
  Decisions d;
  absl::StatusOr<v1::Job> job = jobs_.Submit(req->spec(), &d);
  Apply(std::move(d));
  if (!job.ok()) return ToGrpcStatus(job.status());
  *resp = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status Coordinator::GetJobUnguarded(grpc::ServerContext*,
                                          const v1::GetJobRequest* req, v1::Job* resp) {
  absl::MutexLock lock(&mu_);
  const v1::Job* job = jobs_.Find(req->id());
  if (job == nullptr) {
    return grpc::Status(grpc::NOT_FOUND, absl::StrCat("no job '", req->id(), "'"));
  }
  *resp = *job;
  return grpc::Status::OK;
}

grpc::Status Coordinator::ListJobsUnguarded(grpc::ServerContext*,
                                            const v1::ListJobsRequest*,
                                            v1::ListJobsResponse* resp) {
  absl::MutexLock lock(&mu_);
  for (const v1::Job* job : jobs_.Jobs()) {
    v1::Job* listed = resp->add_jobs();
    *listed = *job;
    listed->mutable_result()->clear_traces();  // GetJob returns them
  }
  for (const RegisteredWorker* w : workers_.Live())
    *resp->add_workers() = WorkerInfoOf(*w);
  resp->set_ps_shards(jobs_.num_ps_shards());
  return grpc::Status::OK;
}

v1::WorkerInfo Coordinator::WorkerInfoOf(const RegisteredWorker& w) {
  v1::WorkerInfo info;
  info.set_id(w.id);
  info.set_peer_address(w.peer_address);
  info.set_state(w.job_id.empty() ? "idle" : "busy");
  info.set_job_id(w.job_id);
  info.set_num_gpus(w.num_gpus);
  return info;
}

CoordinatorStats Coordinator::Stats() {
  absl::MutexLock lock(&mu_);
  return CountCoordinatorStats(jobs_.Jobs(), workers_.Live());
}

grpc::Status Coordinator::CancelJobUnguarded(grpc::ServerContext*,
                                             const v1::CancelJobRequest* req,
                                             v1::Job* resp) {
  absl::MutexLock lock(&mu_);
  Decisions d;
  absl::StatusOr<v1::Job> job = jobs_.Cancel(req->id(), &d);
  Apply(std::move(d));
  if (!job.ok()) return ToGrpcStatus(job.status());
  *resp = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status Coordinator::WatchJobUnguarded(grpc::ServerContext* ctx,
                                            const v1::WatchJobRequest* req,
                                            grpc::ServerWriter<v1::JobEvent>* writer) {
  WatchCursor cursor;
  while (true) {
    std::vector<v1::JobEvent> batch;
    bool finished = false;
    {
      absl::MutexLock lock(&mu_);
      if (jobs_.Find(req->id()) == nullptr) {
        return grpc::Status(grpc::NOT_FOUND, absl::StrCat("no job '", req->id(), "'"));
      }
      if (!jobs_.HasNews(req->id(), cursor) && !shutdown_) {
        changed_.WaitWithTimeout(&mu_, kWatchPoll);
      }
      if (shutdown_) {
        return grpc::Status(grpc::UNAVAILABLE, "server shutting down");
      }
      absl::StatusOr<bool> ended = jobs_.ReadEvents(req->id(), &cursor, &batch);
      if (!ended.ok()) return ToGrpcStatus(ended.status());
      finished = *ended;
    }
    for (const v1::JobEvent& ev : batch) {
      if (!writer->Write(ev)) return grpc::Status::CANCELLED;
    }
    if (finished) return grpc::Status::OK;
    if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
  }
}

}  // namespace gradsync
