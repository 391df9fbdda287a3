#include "worker/worker_daemon.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/logging.h"
#include "common/spec/job_spec.h"
#include "worker/train/device_trainer.h"
#include "worker/train/trainer.h"
#include "worker/model/device_factory.h"

namespace gradsync {

class WorkerDaemon::Reporter final : public TrainingReporter {
 public:
  explicit Reporter(WorkerDaemon* d) : d_(d) {}
  void Progress(const v1::WorkerMessage::Progress& p) override {
    v1::WorkerMessage m;
    *m.mutable_progress() = p;
    d_->Write(m);
  }
  void EpochDone(const v1::WorkerMessage::EpochDone& e) override {
    v1::WorkerMessage m;
    *m.mutable_epoch_done() = e;
    d_->Write(m);
  }

 private:
  WorkerDaemon* d_;
};

WorkerDaemon::WorkerDaemon(WorkerOptions options) : options_(std::move(options)) {
  id_ = options_.id;
  if (id_.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    id_ = absl::StrCat(host, "-", getpid());
  }
}

WorkerDaemon::~WorkerDaemon() {
  Stop();
  JoinJobThread();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
  }
}

absl::StatusOr<std::string> WorkerDaemon::Start() {
  peer_service_ = std::make_unique<PeerService>(&mailboxes_);
  absl::StatusOr<StartedServer> started =
      StartServer(options_.listen, {peer_service_.get()});
  if (!started.ok()) return started.status();
  server_ = std::move(started->server);
  advertise_ = options_.advertise.empty()
                   ? LocalAddress(options_.listen, started->port)
                   : options_.advertise;
  return advertise_;
}

void WorkerDaemon::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  if (session_ctx_ != nullptr) session_ctx_->TryCancel();
  cancelled_ = true;
  if (sync_ != nullptr) sync_->Abort(absl::CancelledError("worker stopping"));
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
    const absl::Time began = absl::Now();
    absl::Status st = Session();
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
    }
    if (absl::Now() - began > absl::Seconds(5)) backoff = absl::Milliseconds(200);
    spdlog::warn("coordinator session ended: {}; retrying in {}", st.ToString(),
                 absl::FormatDuration(backoff));
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), backoff);
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
  JoinJobThread();
}

absl::Status WorkerDaemon::Session() {
  auto channel = MakeChannel(options_.coordinator);
  absl::Status st = WaitForConnected(channel.get(), options_.coordinator,
                                     absl::Now() + absl::Seconds(2));
  if (!st.ok()) return st;
  auto stub = v1::Coordinator::NewStub(channel);
  grpc::ClientContext ctx;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("stopping");
    session_ctx_ = &ctx;
  }
  std::unique_ptr<Stream> stream = stub->Join(&ctx);
  {
    absl::MutexLock lock(&write_mu_);
    stream_ = stream.get();
  }
  v1::WorkerMessage reg;
  reg.mutable_register_()->set_worker_id(id_);
  reg.mutable_register_()->set_peer_address(advertise_);
  reg.mutable_register_()->set_num_gpus(options_.num_gpus);
  Write(reg);

  std::atomic<bool> session_over{false};
  absl::Mutex hb_mu;
  std::thread heartbeat([&] {
    v1::WorkerMessage hb;
    hb.mutable_heartbeat();
    absl::MutexLock lock(&hb_mu);
    while (!session_over.load()) {
      hb_mu.AwaitWithTimeout(
          absl::Condition(
              +[](std::atomic<bool>* b) { return b->load(); }, &session_over),
          options_.heartbeat_interval);
      if (session_over.load()) break;
      Write(hb);
    }
  });

  v1::CoordinatorMessage m;
  while (stream->Read(&m)) {
    switch (m.msg_case()) {
      case v1::CoordinatorMessage::kRegistered:
        spdlog::info("worker {} registered with {} (peer address {})", id_,
                     options_.coordinator, advertise_);
        break;
      case v1::CoordinatorMessage::kAssignment:
        StartJob(m.assignment());
        break;
      case v1::CoordinatorMessage::kCancel:
        CancelJob(m.cancel().job_id(), m.cancel().reason());
        break;
      default:
        break;
    }
  }
  {
    absl::MutexLock lock(&hb_mu);
    session_over = true;
  }
  heartbeat.join();
  // The coordinator is gone: a running job cannot report, cancel it.
  {
    absl::MutexLock lock(&mu_);
    if (!job_id_.empty()) {
      cancelled_ = true;
      if (sync_ != nullptr) {
        sync_->Abort(absl::UnavailableError("lost the coordinator"));
      }
    }
  }
  JoinJobThread();
  {
    absl::MutexLock lock(&write_mu_);
    stream_ = nullptr;
  }
  {
    absl::MutexLock lock(&mu_);
    session_ctx_ = nullptr;
  }
  ctx.TryCancel();
  grpc::Status final = stream->Finish();
  return FromGrpcStatus(final).ok() ? absl::UnavailableError("stream closed")
                                    : FromGrpcStatus(final);
}

void WorkerDaemon::JoinJobThread() {
  if (job_thread_.joinable() &&
      job_thread_.get_id() != std::this_thread::get_id()) {
    job_thread_.join();
  }
}

void WorkerDaemon::StartJob(const v1::Assignment& a) {
  {
    absl::MutexLock lock(&mu_);
    if (!job_id_.empty()) {
      spdlog::error("assignment of {} while running {}: refused", a.job_id(), job_id_);
      v1::WorkerMessage m;
      m.mutable_job_done()->set_job_id(a.job_id());
      m.mutable_job_done()->set_rank(a.rank());
      m.mutable_job_done()->set_code(static_cast<int>(absl::StatusCode::kUnavailable));
      m.mutable_job_done()->set_error(absl::StrCat("worker busy with ", job_id_));
      Write(m);
      return;
    }
    job_id_ = a.job_id();
    cancelled_ = false;
  }
  JoinJobThread();  // previous job's thread has finished its work
  job_thread_ = std::thread([this, a] { JobMain(a); });
}

void WorkerDaemon::CancelJob(const std::string& job_id, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (job_id_ != job_id) return;
  spdlog::warn("{}cancelled: {}", JobTag(job_id, -1), reason);
  cancelled_ = true;
  if (sync_ != nullptr) {
    sync_->Abort(absl::CancelledError(absl::StrCat("job cancelled: ", reason)));
  }
}

absl::StatusOr<std::shared_ptr<const Dataset>> WorkerDaemon::LoadData(
    const std::string& dir, bool train) {
  const std::string key = absl::StrCat(dir, train ? "#train" : "#test");
  {
    absl::MutexLock lock(&mu_);
    auto it = data_cache_.find(key);
    if (it != data_cache_.end()) return it->second;
  }
  absl::StatusOr<Dataset> d = LoadFashionMnist(dir, train);
  if (!d.ok()) return d.status();
  auto shared = std::make_shared<const Dataset>(std::move(*d));
  absl::MutexLock lock(&mu_);
  data_cache_[key] = shared;
  return shared;
}

absl::StatusOr<std::unique_ptr<DeviceModel>> WorkerDaemon::MakeDevice(
    const v1::Assignment& a) {
  if (options_.num_gpus <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", id_, " has no GPU; device=cuda unavailable"));
  }
  DeviceRequest req;
  req.cuda = true;
  absl::StatusOr<MlpSpec> mspec = ParseModelSpec(a.spec().model());
  if (!mspec.ok()) return mspec.status();
  req.model = *mspec;
  req.gpu = options_.gpu >= 0 ? options_.gpu : a.rank() % options_.num_gpus;
  req.allow_tf32 = a.spec().tf32();
  req.max_batch = a.spec().batch_size();
  absl::StatusOr<std::unique_ptr<DeviceModel>> m = MakeDeviceModel(req);
  if (!m.ok()) {
    return absl::Status(m.status().code(),
                        absl::StrCat("worker ", id_, ": ", m.status().message()));
  }
  return m;
}

void WorkerDaemon::JobMain(v1::Assignment a) {
  const std::string tag = JobTag(a.job_id(), a.rank());
  spdlog::info("{}assigned: {} world {} model {}", tag,
               StrategyLabel(a.spec()), a.world_size(), a.spec().model());
  TrainingOutcome outcome;
  outcome.done.set_job_id(a.job_id());
  outcome.done.set_rank(a.rank());
  std::string dir = options_.data_dir;
  if (dir.empty()) dir = a.spec().data_dir();
  if (dir.empty()) dir = kDefaultFashionMnistDir;

  absl::Status st;
  absl::StatusOr<std::shared_ptr<const Dataset>> train = LoadData(dir, true);
  absl::StatusOr<std::shared_ptr<const Dataset>> test =
      train.ok() ? LoadData(dir, false) : train.status();
  if (!train.ok() || !test.ok()) {
    st = !train.ok() ? train.status() : test.status();
  }
  std::unique_ptr<DeviceModel> device_model;
  if (st.ok() && a.spec().device() == v1::DEVICE_CUDA) {
    absl::StatusOr<std::unique_ptr<DeviceModel>> m = MakeDevice(a);
    if (m.ok()) {
      device_model = std::move(*m);
      spdlog::info("{}training on {}", tag, device_model->name());
    } else {
      st = m.status();
    }
  }
  std::unique_ptr<GrpcTransport> transport;
  std::unique_ptr<GradientSync> sync;
  if (st.ok()) {
    if (a.spec().strategy() == v1::STRATEGY_RING) {
      transport = std::make_unique<GrpcTransport>(
          a.job_id(), a.rank(),
          std::vector<std::string>(a.peer_addresses().begin(),
                                   a.peer_addresses().end()),
          mailboxes_.Open(a.job_id()));
    }
    SyncContext sctx;
    sctx.assignment = &a;
    sctx.num_params = a.num_params();
    sctx.transport = transport.get();
    absl::StatusOr<std::unique_ptr<GradientSync>> made = MakeGradientSync(sctx);
    if (made.ok()) {
      sync = std::move(*made);
    } else {
      st = made.status();
    }
  }
  if (st.ok()) {
    {
      absl::MutexLock lock(&mu_);
      sync_ = sync.get();
      if (cancelled_) sync_->Abort(absl::CancelledError("job cancelled"));
    }
    Reporter reporter(this);
    outcome = device_model
                  ? RunDeviceTraining(a, **train, **test, device_model.get(),
                                      sync.get(), &reporter, &cancelled_)
                  : RunTraining(a, **train, **test, sync.get(), &reporter,
                                &cancelled_);
    absl::MutexLock lock(&mu_);
    sync_ = nullptr;
  } else {
    outcome.status = st;
    outcome.done.set_code(static_cast<int>(st.code()));
    outcome.done.set_error(std::string(st.message()));
  }
  if (!outcome.status.ok()) {
    spdlog::warn("{}failed: {}", tag, outcome.status.ToString());
  }
  mailboxes_.Close(a.job_id(), absl::AbortedError("job ended"));
  sync.reset();
  transport.reset();
  device_model.reset();
  // Idle before the coordinator hears of it: it may assign the next job at
  // once (StartJob then joins this thread, which is about to end).
  {
    absl::MutexLock lock(&mu_);
    job_id_.clear();
  }
  v1::WorkerMessage m;
  *m.mutable_job_done() = outcome.done;
  Write(m);
}

}  // namespace gradsync
