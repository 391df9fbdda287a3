#include "worker/job_runner.h"

#include <algorithm>
#include <thread>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/content_store.h"
#include "common/exception_status.h"
#include "common/grpc/grpc_util.h"
#include "common/logging.h"
#include "common/spec/assignment_options.h"
#include "common/spec/job_spec.h"
#include "common/spec/wire_dtype_proto.h"
#include "worker/bench_job/bench_runner.h"
#include "worker/blob_fetch.h"
#include "worker/collectives/hierarchical.h"
#include "worker/job_reports.h"
#include "worker/metrics/metered_sync.h"
#include "worker/model/cpu_threads.h"
#include "worker/model/device_factory.h"
#include "worker/sync/gradient_sync_factory.h"
#include "worker/torch_file_check.h"
#include "worker/train/trainer.h"
#include "worker/train/training_steps.h"

namespace gradsync {
namespace {

// The data-plane settings of an assignment (equal on every rank).
GrpcTransportOptions TransportOptions(const v1::Assignment& a, const Env* env) {
  const v1::JobSpec& spec = a.spec();
  GrpcTransportOptions o;
  o.env = env;
  o.job_secret = a.job_secret();
  o.connections_per_peer = std::max(1, spec.connections_per_peer());
  // Validated by the coordinator; an unknown value cannot reach here.
  o.wire_dtype = WireDtypeOf(spec.wire_dtype()).value_or(WireDtype::kFp32);
  // -1 (never), or 0 from a coordinator that predates the field: no bulk.
  o.bulk_bytes =
      spec.peer_bulk_bytes() > 0 ? static_cast<size_t>(spec.peer_bulk_bytes()) : 0;
  // Only to ranks on this host: across a link the bulk lanes' fixed window
  // is slower (SameHostBulkAddresses).
  o.bulk_peer_addresses = SameHostBulkAddresses(
      {a.peer_addresses().begin(), a.peer_addresses().end()},
      {a.bulk_peer_addresses().begin(), a.bulk_peer_addresses().end()}, a.rank());
  return o;
}

// BLAS threads for a cpu job: `configured` (--cpu_threads) when set, else
// this host's cores shared among the job's ranks on this host (ranks whose
// peer addresses name the same host).
int CpuThreadsFor(const JobOptions& job, int configured) {
  if (configured > 0) return configured;
  const std::vector<int> groups = GroupsByHost(job.peer_addresses);
  int here = 1;
  if (job.rank >= 0 && job.rank < static_cast<int>(groups.size())) {
    here = static_cast<int>(std::count(groups.begin(), groups.end(), groups[job.rank]));
  }
  const int threads =
      CpuComputeThreads(static_cast<int>(std::thread::hardware_concurrency()), here);
  spdlog::info("{} ranks of job {} on this host: {} BLAS threads each", here, job.job_id,
               threads);
  return threads;
}

}  // namespace

class JobRunner::Reporter final : public TrainingReporter {
 public:
  explicit Reporter(JobRunner* d) : d_(d) {}
  void Progress(const ProgressReport& p) override {
    d_->metrics_.OnProgress(p.step, p.samples_per_second);
    v1::WorkerMessage m;
    *m.mutable_progress() = ProgressProto(p);
    d_->Write(m);
  }
  void EpochDone(const EpochReport& e) override {
    v1::WorkerMessage m;
    *m.mutable_epoch_done() = EpochDoneProto(e);
    d_->Write(m);
  }

 private:
  JobRunner* d_;
};

JobRunner::JobRunner(JobRunnerContext context)
    : context_(std::move(context)),
      options_(*context_.options),
      env_(options_.env),
      data_dirs_(options_.data_dir, options_.allowed_data_dirs),
      metrics_(*context_.metrics),
      mailboxes_(*context_.mailboxes),
      id_(context_.worker_id),
      data_cache_(options_.data_cache_bytes) {
  watchdog_ = std::thread([this] { Watch(); });
}

JobRunner::~JobRunner() {
  Stop();
  Join();
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
  }
  watchdog_.join();
}

void JobRunner::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  cancelled_ = true;
  AbortJobLocked(absl::CancelledError("worker stopping"));
  AskToEndLocked(absl::CancelledError("worker stopping"));
}

void JobRunner::AbortRunning(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (job_id_.empty()) return;
  cancelled_ = true;
  AbortJobLocked(status);
  AskToEndLocked(status);
}

void JobRunner::AskToEndLocked(const absl::Status& why) {
  if (job_id_.empty() || stop_asked_ != absl::InfiniteFuture()) return;
  stop_asked_ = env_->Now();
  stop_reason_ = why;
}

void JobRunner::Watch() {
  mu_.Lock();
  for (;;) {
    mu_.Await(absl::Condition(this, &JobRunner::WatchdogHasWork));
    if (closing_) break;
    watched_job_ = job_id_;
    const absl::Time deadline = stop_asked_ + options_.runaway_grace;
    if (env_->AwaitWithDeadline(&mu_, absl::Condition(this, &JobRunner::WatchedJobEnded),
                                deadline)) {
      if (closing_) break;
      continue;  // it ended in time
    }
    // A runaway: whatever its thread runs (a user's forward) ignores every
    // request to stop, and holds this worker busy for good.
    const std::string job = job_id_;
    const int rank = rank_;
    const bool stopping = stopped_;
    const absl::Status why = stop_reason_;
    stop_asked_ = absl::InfiniteFuture();  // once per request to end
    mu_.Unlock();
    const std::string what = absl::StrCat(
        "rank ", rank, " on worker ", id_, " was still running ",
        absl::FormatDuration(options_.runaway_grace), " after it was told to end (",
        why.message(), "): its model does not return (a forward that never ends?); ",
        context_.on_runaway == nullptr ? "the worker stays busy"
        : stopping                     ? "the worker exits"
                                       : "the worker restarts to free it");
    // No JobDone: the job has ended at the coordinator already (it asked
    // for the end), and one would mark this worker idle while it is not;
    // it becomes idle when it registers again after the restart.
    spdlog::error("{}{}", JobTag(job, rank), what);
    if (context_.on_runaway != nullptr) context_.on_runaway(stopping);
    mu_.Lock();
  }
  mu_.Unlock();
}

void JobRunner::AbortJobLocked(const absl::Status& status) {
  if (sync_ != nullptr) sync_->Abort(status);
  if (bench_ != nullptr) bench_->Abort(status);
}

void JobRunner::Join() {
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
    thread_.join();
  }
}

void JobRunner::Start(const v1::Assignment& a) {
  {
    absl::MutexLock lock(&mu_);
    if (!job_id_.empty() || stopped_) {
      const std::string why = stopped_ ? absl::StrCat("worker ", id_, " is stopping")
                                       : absl::StrCat("worker busy with ", job_id_);
      spdlog::error("assignment of {} refused: {}", a.job_id(), why);
      v1::WorkerMessage m;
      m.mutable_job_done()->set_job_id(a.job_id());
      m.mutable_job_done()->set_rank(a.rank());
      m.mutable_job_done()->set_code(static_cast<int>(absl::StatusCode::kUnavailable));
      m.mutable_job_done()->set_error(why);
      Write(m);
      return;
    }
    job_id_ = a.job_id();
    rank_ = a.rank();
    stop_asked_ = absl::InfiniteFuture();
    cancelled_ = false;
    cancel_requested_ = false;
  }
  // Peers' streams for this job are admitted from now on (not only once the
  // job thread has loaded its data); Run closes it.
  mailboxes_.Open(a.job_id(), a.job_secret(), a.world_size());
  Join();  // previous job's thread has finished its work
  thread_ = std::thread([this, a] { GuardedRun(a); });
}

void JobRunner::GuardedRun(const v1::Assignment& a) {
  const absl::Status failure =
      GuardStatus(absl::StrCat("rank ", a.rank(), " on worker ", id_), [&] {
        Run(a);
        return absl::OkStatus();
      });
  if (failure.ok()) return;
  // The job's objects are gone with the stack: forget them, then report.
  spdlog::error("{}failed: {}", JobTag(a.job_id(), a.rank()), failure.ToString());
  {
    absl::MutexLock lock(&mu_);
    sync_ = nullptr;
    bench_ = nullptr;
  }
  mailboxes_.Close(a.job_id(), absl::AbortedError("job ended"));
  v1::WorkerMessage::JobDone done;
  done.set_job_id(a.job_id());
  done.set_rank(a.rank());
  done.set_code(static_cast<int>(failure.code()));
  done.set_error(std::string(failure.message()));
  ReportJobDone(done);
}

void JobRunner::Cancel(const std::string& job_id, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (job_id_ != job_id) return;
  spdlog::warn("{}cancelled: {}", JobTag(job_id, -1), reason);
  cancelled_ = true;
  cancel_requested_ = true;
  AbortJobLocked(absl::CancelledError(absl::StrCat("job cancelled: ", reason)));
  AskToEndLocked(absl::CancelledError(absl::StrCat("job cancelled: ", reason)));
}

absl::StatusOr<std::shared_ptr<const Dataset>> JobRunner::LoadData(const std::string& dir,
                                                                   bool train) {
  const std::string key = absl::StrCat(dir, train ? "#train" : "#test");
  if (std::shared_ptr<const Dataset> kept = data_cache_.Get(key)) return kept;
  absl::StatusOr<Dataset> d =
      LoadFashionMnist(dir, train, /*limit=*/0, env_, &cancelled_);
  if (!d.ok()) return d.status();
  auto shared = std::make_shared<const Dataset>(std::move(*d));
  data_cache_.Put(key, shared);
  return shared;
}

absl::Status JobRunner::LoadTensorData(const JobOptions& job,
                                       std::shared_ptr<const Dataset>* train,
                                       std::shared_ptr<const Dataset>* test) {
  const std::string key = absl::StrCat("tensors:", job.data_sha256);
  {
    std::shared_ptr<const Dataset> tr = data_cache_.Get(key + "#train");
    std::shared_ptr<const Dataset> te = data_cache_.Get(key + "#test");
    if (tr != nullptr && te != nullptr) {
      *train = std::move(tr);
      *test = std::move(te);
      return absl::OkStatus();
    }
  }
  if (absl::Status st = TorchScriptAvailable(); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("worker ", id_, ": ", st.message()));
  }
  absl::StatusOr<std::string> path =
      job.data_path.empty() ? FetchBlobOfJob(job.data_sha256) : CheckWorkerDataFile(job);
  if (!path.ok()) {
    return absl::Status(
        path.status().code(),
        absl::StrCat("worker ", id_, ": data: ", path.status().message()));
  }
  if (absl::Status st = CheckInHelper(absl::StrCat("data:", *path)); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("worker ", id_, ": data file ",
                                                job.data_sha256, ": ", st.message()));
  }
  absl::StatusOr<TrainTestData> d = LoadTensorDataFile(*path);
  if (!d.ok()) {
    return absl::Status(d.status().code(),
                        absl::StrCat("worker ", id_, ": ", d.status().message()));
  }
  *train = std::make_shared<const Dataset>(std::move(d->train));
  *test = std::make_shared<const Dataset>(std::move(d->test));
  data_cache_.Put(key + "#train", *train);
  data_cache_.Put(key + "#test", *test);
  return absl::OkStatus();
}

// The file must resolve into an allowed data directory (symlinks followed;
// the resolved path is the one hashed and read). A file whose hash differs
// is refused without its hash: the message must not tell a job's submitter
// the hash of a file on the worker's host that they could not read.
absl::StatusOr<std::string> JobRunner::CheckWorkerDataFile(const JobOptions& job) {
  absl::StatusOr<std::string> real = data_dirs_.ResolveFile(job.data_path, job.rank);
  if (!real.ok()) {
    if (real.status().code() != absl::StatusCode::kNotFound) return real.status();
    return absl::NotFoundError(
        absl::StrCat(real.status().message(),
                     "; tensors-on-workers: data must be at that path on every worker"));
  }
  absl::StatusOr<std::string> got = Sha256OfFile(*real, env_);
  if (!got.ok()) {
    return absl::NotFoundError(absl::StrCat(
        "rank ", job.rank, " cannot read ", job.data_path, " (", got.status().message(),
        "); tensors-on-workers: data must be at that path on every worker"));
  }
  if (*got != job.data_sha256) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", job.rank, ": ", job.data_path, " here does not have the job's sha256 ",
        job.data_sha256,
        "; every worker must hold the same file (copy it again, or resubmit with "
        "the hash of the file you mean: sha256sum FILE)"));
  }
  return *real;
}

absl::Status JobRunner::CheckInHelper(const std::string& arg) {
  if (options_.helper_binary.empty()) return absl::OkStatus();
  TorchFileCheck check;
  check.helper = options_.helper_binary;
  check.torch_plugin = options_.torch_plugin;
  check.arg = arg;
  check.env = env_;
  return CheckTorchFileInHelper(check);
}

absl::StatusOr<std::string> JobRunner::FetchBlobOfJob(const std::string& sha256) {
  absl::MutexLock lock(&cache_mu_);  // one fetch at a time; jobs run one at a time
  if (blob_cache_ == nullptr) {
    absl::StatusOr<std::unique_ptr<ContentStore>> opened =
        ContentStore::Open(options_.cache_dir);
    if (!opened.ok()) {
      return absl::Status(opened.status().code(),
                          absl::StrCat("--cache_dir: ", opened.status().message()));
    }
    blob_cache_ = *std::move(opened);
  }
  BlobFetchOptions fetch;
  fetch.coordinator = options_.coordinator;
  fetch.timeout = options_.fetch_timeout;
  fetch.cancelled = &cancelled_;
  fetch.env = env_;
  return FetchBlob(sha256, blob_cache_.get(), fetch);
}

absl::StatusOr<std::unique_ptr<DeviceModel>> JobRunner::MakeDevice(const JobOptions& job,
                                                                   const Dataset& train) {
  DeviceRequest req;
  if (job.torchscript_sha256.empty()) {
    absl::StatusOr<MlpSpec> model = ModelOf(job);
    if (!model.ok()) return model.status();
    req.model = *model;
  } else {
    // Before fetching: this worker could not train it anyway.
    if (absl::Status st = TorchScriptAvailable(); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("worker ", id_, ": ", st.message()));
    }
    absl::StatusOr<std::string> path = FetchBlobOfJob(job.torchscript_sha256);
    if (!path.ok()) {
      return absl::Status(
          path.status().code(),
          absl::StrCat("worker ", id_, ": model: ", path.status().message()));
    }
    req.source = ModelSource::kTorchScript;
    req.torchscript_path = *path;
    req.features = train.features;
    req.classes = train.classes;
    req.max_job_memory = options_.max_job_memory;
    if (absl::Status st = CheckInHelper(
            absl::StrCat("model:", train.features, ":", train.classes, ":", *path));
        !st.ok()) {
      return absl::Status(st.code(),
                          absl::StrCat("worker ", id_, ": model ", job.torchscript_sha256,
                                       ": ", st.message()));
    }
  }
  if (job.cuda) {
    if (options_.num_gpus <= 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("worker ", id_, " has no GPU; device=cuda unavailable"));
    }
    req.cuda = true;
    req.gpu = options_.gpu >= 0 ? options_.gpu : job.rank % options_.num_gpus;
    req.allow_tf32 = job.allow_tf32;
    req.max_batch = job.max_batch;
  } else {
    req.cpu_threads = CpuThreadsFor(job, options_.cpu_threads);
  }
  absl::StatusOr<std::unique_ptr<DeviceModel>> m = MakeDeviceModel(req);
  if (!m.ok()) {
    return absl::Status(m.status().code(),
                        absl::StrCat("worker ", id_, ": ", m.status().message()));
  }
  return m;
}

absl::StatusOr<std::shared_ptr<const TuningTable>> JobRunner::JobTuning(
    const v1::Assignment& a) const {
  if (a.spec().tuning_table().empty()) return options_.tuning;
  absl::StatusOr<TuningTable> table =
      TuningTable::Parse(a.spec().tuning_table(), "tuning_table");
  if (!table.ok()) return table.status();  // validated at submit: not expected
  return std::shared_ptr<const TuningTable>(
      std::make_shared<TuningTable>(*std::move(table)));
}

absl::StatusOr<JobRunner::JobParts> JobRunner::Prepare(const v1::Assignment& a,
                                                       const JobOptions* job) {
  JobParts parts;
  if (!job->data_sha256.empty()) {
    absl::Status st = LoadTensorData(*job, &parts.train, &parts.test);
    if (!st.ok()) return st;
  } else {
    // Before any file is opened: the job may name only allowed directories.
    absl::StatusOr<std::string> dir = data_dirs_.Resolve(a.spec().data_dir(), a.rank());
    if (!dir.ok()) return dir.status();
    absl::StatusOr<std::shared_ptr<const Dataset>> train = LoadData(*dir, true);
    if (!train.ok()) return train.status();
    absl::StatusOr<std::shared_ptr<const Dataset>> test = LoadData(*dir, false);
    if (!test.ok()) return test.status();
    parts.train = *train;
    parts.test = *test;
  }
  absl::StatusOr<std::unique_ptr<DeviceModel>> model = MakeDevice(*job, *parts.train);
  if (!model.ok()) return model.status();
  parts.model = std::move(*model);
  parts.stall = MakeStallWatch(a);
  if (a.spec().strategy() == v1::STRATEGY_ALLREDUCE) {
    parts.transport = std::make_unique<GrpcTransport>(
        a.job_id(), a.rank(),
        std::vector<std::string>(a.peer_addresses().begin(), a.peer_addresses().end()),
        mailboxes_.Open(a.job_id(), a.job_secret(), a.world_size()),
        TransportOptions(a, env_));
    parts.metered = std::make_unique<MeteredTransport>(
        parts.transport.get(), metrics_.peer_sent_bytes, metrics_.peer_received_bytes);
    parts.watched = std::make_unique<StallTransport>(
        parts.metered.get(), parts.stall.get(),
        std::vector<std::string>(a.peer_addresses().begin(), a.peer_addresses().end()));
  }
  absl::StatusOr<std::shared_ptr<const TuningTable>> tuning = JobTuning(a);
  if (!tuning.ok()) return tuning.status();
  parts.tuning = *std::move(tuning);
  absl::StatusOr<std::unique_ptr<GradientSync>> sync = MakeGradientSync(
      job, parts.watched.get(), parts.tuning.get(), parts.stall.get(), env_);
  if (!sync.ok()) return sync.status();
  parts.sync = std::make_unique<MeteredSync>(std::move(*sync), job, &metrics_, env_);
  return parts;
}

void JobRunner::Run(v1::Assignment a) {
  if (options_.throw_in_job_for_test != nullptr) {
    options_.throw_in_job_for_test(a);
  }
  if (IsBench(a.spec())) {
    ReportJobDone(RunBench(a));
    return;
  }
  const std::string tag = JobTag(a.job_id(), a.rank());
  spdlog::info("{}assigned: {} world {} model {}", tag, StrategyLabel(a.spec()),
               a.world_size(), a.spec().model());
  // The job's settings as plain options, once: nothing below this reads
  // the Assignment. Outlives `parts`, whose sync reads it.
  absl::StatusOr<JobOptions> job = JobOptionsOf(a);
  TrainingOutcome outcome;
  outcome.done.job_id = a.job_id();
  outcome.done.rank = a.rank();
  absl::StatusOr<JobParts> parts =
      job.ok() ? Prepare(a, &*job) : absl::StatusOr<JobParts>(job.status());
  if (parts.ok()) {
    spdlog::info("{}training on {}", tag, parts->model->name());
    {
      absl::MutexLock lock(&mu_);
      sync_ = parts->sync.get();
      if (cancelled_) sync_->Abort(absl::CancelledError("job cancelled"));
    }
    Reporter reporter(this);
    TrainingOptions training;
    training.env = env_;
    training.compute_slowdown = options_.compute_slowdown * job->compute_slowdown;
    outcome = RunTraining(*job, *parts->train, *parts->test, parts->model.get(),
                          parts->sync.get(), &reporter, &cancelled_, training);
    absl::MutexLock lock(&mu_);
    sync_ = nullptr;
  } else {
    RecordFailure(parts.status(), &outcome);
  }
  ClassifyCancelledPeerFailure(&outcome);
  if (!outcome.status.ok()) {
    spdlog::warn("{}failed: {}", tag, outcome.status.ToString());
  }
  mailboxes_.Close(a.job_id(), absl::AbortedError("job ended"));
  // Sync before transport before model: each uses the next.
  if (parts.ok()) {
    parts->sync.reset();
    parts->watched.reset();
    parts->metered.reset();
    parts->transport.reset();
    parts->stall.reset();
    parts->model.reset();
  }
  ReportJobDone(JobDoneProto(outcome.done));
}

void JobRunner::ClassifyCancelledPeerFailure(TrainingOutcome* outcome) {
  const absl::StatusCode code = outcome->status.code();
  if (code != absl::StatusCode::kUnavailable && code != absl::StatusCode::kAborted) {
    return;
  }
  absl::MutexLock lock(&mu_);
  if (!env_->AwaitWithTimeout(&mu_, absl::Condition(&cancel_requested_),
                              kCancelAfterPeerFailureWait)) {
    return;
  }
  RecordFailure(absl::CancelledError(absl::StrCat("job cancelled (a peer stopped first: ",
                                                  outcome->status.message(), ")")),
                outcome);
}

std::unique_ptr<StallWatch> JobRunner::MakeStallWatch(const v1::Assignment& a) {
  return std::make_unique<StallWatch>(
      StallThreshold(a.spec()),
      [this, job_id = a.job_id(), rank = a.rank()](const StallReport& r) {
        ReportStall(job_id, rank, r);
      },
      env_);
}

void JobRunner::ReportStall(const std::string& job_id, int rank, const StallReport& r) {
  v1::WorkerMessage m;
  v1::WorkerMessage::Stall* s = m.mutable_stall();
  s->set_job_id(job_id);
  s->set_rank(rank);
  s->set_step(r.step);
  s->set_bucket(r.bucket);
  s->set_phase(r.phase);
  s->set_waiting_for(r.waiting_for);
  s->set_waited_ms(absl::ToInt64Milliseconds(r.waited));
  s->set_resolved(r.resolved);
  if (r.resolved) {
    spdlog::info("{}{}", JobTag(job_id, rank), StallText(*s));
  } else {
    spdlog::warn("{}{}", JobTag(job_id, rank), StallText(*s));
    metrics_.stalls->Increment();
  }
  Write(m);
}

void JobRunner::ReportJobDone(const v1::WorkerMessage::JobDone& done) {
  // Idle before the coordinator hears of it: it may assign the next job at
  // once (Start then joins this thread, which is about to end).
  metrics_.OnJobDone(static_cast<absl::StatusCode>(done.code()), done.comm_seconds(),
                     done.exposed_comm_seconds());
  {
    absl::MutexLock lock(&mu_);
    job_id_.clear();
  }
  v1::WorkerMessage m;
  *m.mutable_job_done() = done;
  Write(m);
}

v1::WorkerMessage::JobDone JobRunner::RunBench(const v1::Assignment& a) {
  const std::string tag = JobTag(a.job_id(), a.rank());
  spdlog::info("{}bench: {} of {} sizes, world {}", tag,
               BenchOpName(a.spec().bench().op()), a.spec().bench().sizes_size(),
               a.world_size());
  const absl::Time began = env_->Now();
  v1::WorkerMessage::JobDone done;
  done.set_job_id(a.job_id());
  done.set_rank(a.rank());
  absl::StatusOr<std::shared_ptr<const TuningTable>> tuning = JobTuning(a);
  absl::StatusOr<JobOptions> job = JobOptionsOf(a);
  absl::StatusOr<BenchRankResult> result;
  if (!tuning.ok() || !job.ok()) {
    result = !tuning.ok() ? tuning.status() : job.status();
    mailboxes_.Close(a.job_id(), result.status());
  } else {
    GrpcTransport transport(
        a.job_id(), a.rank(),
        std::vector<std::string>(a.peer_addresses().begin(), a.peer_addresses().end()),
        mailboxes_.Open(a.job_id(), a.job_secret(), a.world_size()),
        TransportOptions(a, env_));
    MeteredTransport metered(&transport, metrics_.peer_sent_bytes,
                             metrics_.peer_received_bytes);
    BenchRunner runner(*std::move(job), &metered, tuning->get(), env_);
    {
      absl::MutexLock lock(&mu_);
      bench_ = &runner;
      if (cancelled_) runner.Abort(absl::CancelledError("job cancelled"));
    }
    result = runner.Run([this, &a](int sizes_done, int total) {
      v1::WorkerMessage m;
      v1::WorkerMessage::Progress* p = m.mutable_progress();
      p->set_job_id(a.job_id());
      p->set_rank(a.rank());
      p->set_step(sizes_done);
      p->set_total_steps(total);
      Write(m);
    });
    {
      absl::MutexLock lock(&mu_);
      bench_ = nullptr;
    }
    mailboxes_.Close(a.job_id(), absl::AbortedError("job ended"));
  }
  done.set_wall_seconds(absl::ToDoubleSeconds(env_->Now() - began));
  if (!result.ok()) {
    spdlog::warn("{}failed: {}", tag, result.status().ToString());
    done.set_code(static_cast<int>(result.status().code()));
    done.set_error(std::string(result.status().message()));
    return done;
  }
  *done.mutable_bench() = BenchRankResultProto(*result);
  return done;
}

}  // namespace gradsync
