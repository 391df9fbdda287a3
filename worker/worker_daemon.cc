#include "worker/worker_daemon.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "worker/restart.h"

namespace gradsync {
namespace {

std::string HostName() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

// The address peers dial: `advertise` as given, except "auto" (this host's
// name and the bound port: containers scaled by compose and StatefulSet pods
// resolve each other by hostname) and "" (the listen address with 0.0.0.0 ->
// 127.0.0.1 and the bound port).
std::string AdvertiseAddress(const std::string& advertise, const std::string& listen,
                             int port) {
  if (advertise == "auto") return absl::StrCat(HostName(), ":", port);
  if (advertise.empty()) return LocalAddress(listen, port);
  return advertise;
}

}  // namespace

WorkerDaemon::WorkerDaemon(WorkerOptions options)
    : options_(std::move(options)), env_(options_.env) {
  id_ = options_.id;
  if (id_.empty()) id_ = absl::StrCat(HostName(), "-", getpid());
  JobRunnerContext jobs;
  jobs.options = &options_;
  jobs.worker_id = id_;
  jobs.metrics = &metrics_;
  jobs.mailboxes = &mailboxes_;
  jobs.write = [this](const v1::WorkerMessage& m) { return Write(m); };
  if (!options_.restart_argv.empty()) {
    // A runaway job (worker/restart.h): only a new process image stops its
    // thread.
    jobs.on_runaway = [argv = options_.restart_argv](bool stopping) {
      spdlog::default_logger()->flush();
      if (stopping) std::_Exit(0);
      const absl::Status st = RestartSelf(argv);
      spdlog::critical("cannot restart the worker: {}; exiting", st.ToString());
      spdlog::default_logger()->flush();
      std::_Exit(1);
    };
  }
  jobs_ = std::make_unique<JobRunner>(std::move(jobs));
}

WorkerDaemon::~WorkerDaemon() {
  Stop();
  jobs_.reset();  // joins the job thread while the servers still run
  for (grpc::Server* s : {server_.get(), bulk_server_.get()}) {
    if (s == nullptr) continue;
    s->Shutdown(ToChrono(env_->Now() + absl::Seconds(1)));
    s->Wait();
  }
}

absl::StatusOr<std::string> WorkerDaemon::Start() {
  peer_service_ = std::make_unique<PeerService>(
      &mailboxes_, metrics_.peer_streams->WithLabels({"peer"}));
  absl::StatusOr<StartedServer> started =
      StartPeerServer(options_.listen, {peer_service_.get()});
  if (!started.ok()) return started.status();
  server_ = std::move(started->server);
  advertise_ = AdvertiseAddress(options_.advertise, options_.listen, started->port);
  if (options_.bulk_port >= 0) {
    bulk_peer_service_ = std::make_unique<PeerService>(
        &mailboxes_, metrics_.peer_streams->WithLabels({"bulk"}));
    absl::StatusOr<StartedServer> bulk = StartPeerServer(
        absl::StrCat(AddressHost(options_.listen), ":", options_.bulk_port),
        {bulk_peer_service_.get()}, /*bulk=*/true);
    if (!bulk.ok()) {
      return absl::UnavailableError(absl::StrCat("--bulk_port: ", bulk.status().message(),
                                                 " (-1 runs no bulk server)"));
    }
    bulk_server_ = std::move(bulk->server);
    bulk_advertise_ = BulkAddress(advertise_, bulk->port);
    spdlog::info("bulk Peer server on port {}, advertised as {}", bulk->port,
                 bulk_advertise_);
  }
  return advertise_;
}

void WorkerDaemon::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  if (session_ctx_ != nullptr) session_ctx_->TryCancel();
  jobs_->Stop();
}

bool WorkerDaemon::Write(const v1::WorkerMessage& m) {
  absl::MutexLock lock(&write_mu_);
  if (stream_ == nullptr) return false;
  return stream_->Write(m);
}

void WorkerDaemon::Run() {
  absl::Duration backoff = absl::Milliseconds(200);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
    }
    const absl::Time began = env_->Now();
    absl::Status st = Session();
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
    }
    if (env_->Now() - began > absl::Seconds(5)) backoff = absl::Milliseconds(200);
    spdlog::warn("coordinator session ended: {}; retrying in {}", st.ToString(),
                 absl::FormatDuration(backoff));
    absl::MutexLock lock(&mu_);
    env_->AwaitWithTimeout(&mu_, absl::Condition(&stopping_), backoff);
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
  jobs_->Join();
}

// Writes a heartbeat every heartbeat_interval on its own thread until
// stopped (or destroyed).
class WorkerDaemon::Heartbeats {
 public:
  explicit Heartbeats(WorkerDaemon* d)
      : thread_([this, d] {
          v1::WorkerMessage hb;
          hb.mutable_heartbeat();
          absl::MutexLock lock(&mu_);
          const absl::Duration interval = d->options_.heartbeat_interval;
          const Env* const env = d->env_;
          while (!env->AwaitWithTimeout(&mu_, absl::Condition(&over_), interval)) {
            const absl::Time before = env->Now();
            const bool written = d->Write(hb);
            // A write blocked for k intervals delayed k heartbeats.
            absl::Duration rest;
            const int64_t late = absl::IDivDuration(env->Now() - before, interval, &rest);
            d->metrics_.heartbeats_missed->Add(
                static_cast<double>(late + (written ? 0 : 1)));
          }
        }) {}
  ~Heartbeats() { Stop(); }

  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      over_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  absl::Mutex mu_;
  bool over_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after mu_ and over_ exist
};

void WorkerDaemon::ReadCoordinatorMessages(SessionStream* stream) {
  v1::CoordinatorMessage m;
  while (stream->Read(&m)) {
    switch (m.msg_case()) {
      case v1::CoordinatorMessage::kRegistered:
        spdlog::info("worker {} registered with {} (peer address {})", id_,
                     options_.coordinator, advertise_);
        break;
      case v1::CoordinatorMessage::kAssignment:
        jobs_->Start(m.assignment());
        break;
      case v1::CoordinatorMessage::kCancel:
        jobs_->Cancel(m.cancel().job_id(), m.cancel().reason());
        break;
      default:
        break;
    }
  }
}

absl::Status WorkerDaemon::Session() {
  auto channel = MakeChannel(options_.coordinator);
  // Abandoned as soon as Stop is called: a SIGTERM while the coordinator
  // is unreachable ends the worker at once, not 2 s later.
  absl::Status st = WaitForConnected(
      channel.get(), options_.coordinator, env_->Now() + absl::Seconds(2),
      [this] {
        absl::MutexLock lock(&mu_);
        return stopping_ ? absl::CancelledError("stopping") : absl::OkStatus();
      },
      env_);
  if (!st.ok()) return st;
  auto stub = v1::Coordinator::NewStub(channel);
  grpc::ClientContext ctx;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("stopping");
    session_ctx_ = &ctx;
  }
  SessionStream stream(stub.get(), &ctx);
  {
    absl::MutexLock lock(&write_mu_);
    stream_ = &stream;
  }
  v1::WorkerMessage reg;
  reg.mutable_register_()->set_worker_id(id_);
  reg.mutable_register_()->set_peer_address(advertise_);
  reg.mutable_register_()->set_bulk_peer_address(bulk_advertise_);
  reg.mutable_register_()->set_num_gpus(options_.num_gpus);
  Write(reg);

  Heartbeats heartbeats(this);
  ReadCoordinatorMessages(&stream);
  heartbeats.Stop();
  // The coordinator is gone: a running job cannot report, cancel it.
  jobs_->AbortRunning(absl::UnavailableError("lost the coordinator"));
  jobs_->Join();
  {
    absl::MutexLock lock(&write_mu_);
    stream_ = nullptr;
  }
  {
    absl::MutexLock lock(&mu_);
    session_ctx_ = nullptr;
  }
  ctx.TryCancel();
  grpc::Status final = stream.Finish();
  return FromGrpcStatus(final).ok() ? absl::UnavailableError("stream closed")
                                    : FromGrpcStatus(final);
}

}  // namespace gradsync
