#include "worker/train/trainer.h"

#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include <spdlog/spdlog.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/kernels.h"
#include "common/logging.h"
#include "common/spec/job_limits.h"
#include "common/trace/trace.h"
#include "worker/model/mlp.h"
#include "worker/sync/allreduce_checkpoint.h"
#include "worker/train/comm_pipeline.h"
#include "worker/train/training_steps.h"

namespace gradsync {
namespace {

using Output = GradientSync::Output;

// One rank's run of one job; the numbered steps of RunTraining's comment.
// Lives on the training thread.
class TrainingRun {
 public:
  TrainingRun(const JobOptions& job, const Dataset& train, const Dataset& test,
              DeviceModel* model, GradientSync* sync, TrainingReporter* reporter,
              const std::atomic<bool>* cancelled, const TrainingOptions& options)
      : job_(job),
        train_(train),
        test_(test),
        model_(model),
        sync_(sync),
        reporter_(reporter),
        cancelled_(cancelled),
        options_(options),
        tag_(JobTag(job.job_id, job.rank)),
        out_(NewOutcome(job, model->name())) {}

  TrainingOutcome Run() {
    absl::Status st = Setup();     // 1, 2
    if (st.ok()) st = Loop();      // 3, 4
    if (st.ok()) st = Complete();  // 5
    if (!st.ok()) Fail(st);
    ExportTrace(st.ok());
    return std::move(out_);
  }

 private:
  absl::Status Setup();
  // The MLP's spec, checked against the data; none for a TorchScript model,
  // which brings its own shape and initial parameters (its file's, the same
  // on every rank).
  absl::StatusOr<std::optional<MlpSpec>> BuiltInSpec() const;
  absl::Status Loop();
  // Copies this rank's samples of `step` to the device.
  absl::Status Stage(int64_t step);
  // Enqueues forward/backward of `step`; each ready bucket starts its copy to
  // the step's host slot and goes to the communication threads.
  absl::Status Compute(int64_t step);
  absl::Status ForwardBackward(int64_t step);  // Compute without prediction
  // Takes the loss of `step` (computed by now or soon) and reports it;
  // `last`: this rank's final step.
  absl::Status StepDone(int64_t step, bool last = false);
  absl::Status Complete();
  // Applies every synchronised step up to `upto` to the model, and
  // checkpoints the model when due.
  absl::Status ApplyThrough(int64_t upto);
  // Copies the model's state into the checkpointer's buffer and starts
  // sending it as the checkpoint after `steps` steps (waits for the previous
  // one first).
  absl::Status StartCheckpoint(int64_t steps);
  absl::StatusOr<double> TestAccuracy();
  // Detaches the recorder from the model and, when `keep` (the run
  // succeeded: only a successful job's result carries timelines), moves its
  // events into JobDone.
  void ExportTrace(bool keep);
  double ComputeSeconds() const {
    return std::max(0.0, absl::ToDoubleSeconds(options_.env->Now() - t0_) - exposed_ -
                             reports_->eval_seconds());
  }
  void Fail(const absl::Status& st) {
    sync_->Abort(st);
    if (comm_) {
      comm_->Fail(st);
      comm_->Stop();
    }
    RecordFailure(st, &out_);
    // How far it got: an elastic job's next generation counts the steps it
    // does again from this.
    out_.done.steps = applied_;
  }

  const JobOptions& job_;
  const Dataset& train_;
  const Dataset& test_;
  DeviceModel* const model_;
  GradientSync* const sync_;
  TrainingReporter* const reporter_;
  const std::atomic<bool>* const cancelled_;
  const TrainingOptions options_;
  const std::string tag_;

  TrainingOutcome out_;
  std::vector<Range> buckets_;
  std::shared_ptr<float> params_buf_;  // host copy of the parameters
  float* params_ = nullptr;
  std::optional<StepPlan> plan_;
  std::unique_ptr<StepReports> reports_;
  std::unique_ptr<TraceRecorder> trace_;  // spec.trace; outlives comm_
  std::unique_ptr<CommPipeline> comm_;
  AllreduceCheckpointer* ckpt_ = nullptr;  // the sync's; null: no checkpoints
  // The synchronisation is the identity (one rank, depth 0): each step's
  // gradient is applied where backward left it, without copies or
  // SyncBucket.
  bool own_gradient_ = false;
  bool predict_ = false;  // JobOptions::weight_prediction, where it applies
  double exposed_ = 0;
  int64_t applied_ = 0;
  // Job-wide steps (GradientSync::JobPushesApplied() >= 0): the job's
  // pushes as seen once the latest step was applied; -1 otherwise.
  int64_t job_pushes_ = -1;
  int64_t steps_run_ = 0;  // this rank's steps, the start's included
  absl::Time t0_;
};

absl::StatusOr<std::optional<MlpSpec>> TrainingRun::BuiltInSpec() const {
  if (!job_.torchscript_sha256.empty()) return std::optional<MlpSpec>();
  absl::StatusOr<MlpSpec> parsed = ModelOf(job_);
  if (!parsed.ok()) return parsed.status();
  if (parsed->widths.front() != train_.features) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: input width ", parsed->widths.front(), " but the data has ",
                     train_.features, " features"));
  }
  return std::optional<MlpSpec>(*std::move(parsed));
}

absl::Status TrainingRun::Setup() {
  absl::StatusOr<std::optional<MlpSpec>> built_in = BuiltInSpec();
  if (!built_in.ok()) return built_in.status();
  const std::optional<MlpSpec>& spec = *built_in;
  const size_t n = model_->num_params();
  buckets_ = MakeBuckets(*model_, job_.bucket_bytes);
  // Gradient slots: step t's slot is in use from its copies until it is
  // applied, up to `depth` steps later, while steps up to t + depth + 1 are
  // copied: depth + 2 slots.
  const int depth = sync_->pipeline_depth();
  if (depth < 0 || depth > kMaxAllreduceAsyncStaleness) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline depth ", depth, " outside [0, ", kMaxAllreduceAsyncStaleness, "]"));
  }
  if (depth > 0 && sync_->output() == Output::kParameters) {
    // One host parameter buffer: parameters of later steps would overwrite
    // those not yet applied.
    return absl::InternalError("parameter output needs pipeline depth 0");
  }
  own_gradient_ =
      sync_->identity() && depth == 0 && sync_->output() == Output::kAveragedGradient;
  // Ring async: the gradient of step t is computed before the `depth`
  // averaged gradients in flight are applied; with weight prediction it is
  // computed on the parameters extrapolated over them.
  predict_ =
      job_.weight_prediction && depth > 0 && sync_->output() == Output::kAveragedGradient;
  absl::Status st = model_->Configure(buckets_, job_.optimizer, depth + 2);
  if (!st.ok()) return st;
  std::vector<std::shared_ptr<float>> slots;
  for (int i = 0; i < depth + 2; ++i) {
    absl::StatusOr<std::shared_ptr<float>> buf = model_->AllocHost(n);
    if (!buf.ok()) return buf.status();
    slots.push_back(*buf);
  }
  absl::StatusOr<std::shared_ptr<float>> params = model_->AllocHost(n);
  if (!params.ok()) return params.status();
  params_buf_ = *params;
  params_ = params_buf_.get();

  if (spec.has_value()) {
    Mlp(*spec).InitParams(job_.seed, params_);
  } else {
    st = model_->GetParams(params_);
    if (!st.ok()) return st;
  }
  st = sync_->Initialize(buckets_, params_);
  ckpt_ = sync_->checkpointer();
  if (st.ok() && ckpt_ != nullptr && ckpt_->restored() != nullptr) {
    st = model_->SetOptimizerState(ckpt_->restored()->optimizer);
  }
  if (st.ok()) st = model_->SetParams(params_);
  if (!st.ok()) return st;
  const std::string init_sum = ChecksumHex(params_, n);
  spdlog::info("{}{}: initial parameters {} ({} floats, {} buckets, depth {}{}{})", tag_,
               model_->name(), init_sum, n, buckets_.size(), depth,
               own_gradient_ ? "; one rank: gradients stay in the model" : "",
               predict_ ? "; weight prediction" : "");

  absl::StatusOr<StepPlan> plan = StepPlan::Make(job_, train_);
  if (!plan.ok()) return plan.status();
  plan_.emplace(std::move(*plan));
  reports_ = std::make_unique<StepReports>(job_, *plan_, init_sum, reporter_, options_);
  if (job_.trace) {
    trace_ = std::make_unique<TraceRecorder>();
    model_->SetTrace(trace_.get());
  }
  comm_ = std::make_unique<CommPipeline>(model_, sync_, buckets_, std::move(slots),
                                         params_, trace_.get(), options_.env);
  comm_->SetGradientWeight(static_cast<float>(plan_->gradient_weight()));
  return absl::OkStatus();
}

// Job-wide steps (ps async): the budget is total x world pushes for the
// job, so a rank runs on past `total` while others lag (up to the whole
// budget alone) and stops after the step whose answers show the budget
// spent; the ranks that still had a step in flight push it too, so the
// job applies between total x world and that plus world - 1 pushes.
absl::Status TrainingRun::Loop() {
  const int64_t total = plan_->total();
  const int depth = sync_->pipeline_depth();
  job_pushes_ = sync_->JobPushesApplied();
  const bool job_wide = job_pushes_ >= 0;
  const int64_t world = std::max(1, job_.world_size);
  // A resumed job continues at its checkpoint's step; the data order of a
  // step depends on the step only (StepPlan::Gather), so it is unchanged.
  const int64_t start = sync_->start_step();
  if (start < 0 || start > total) {
    return absl::OutOfRangeError(
        absl::StrCat("resuming at step ", start, " of a job of ", total, " steps"));
  }
  applied_ = start;
  steps_run_ = start;
  const int64_t limit = job_wide ? start + (total - start) * world : total;
  const int64_t budget = total * world;
  if (job_.checkpoint_at_start && ckpt_ != nullptr && ckpt_->saves()) {
    // An elastic generation is resumable from its first step on (the
    // coordinator counts it committed once this rank reports).
    absl::Status st = StartCheckpoint(start);
    if (st.ok()) st = ckpt_->Wait();
    if (!st.ok()) return st;
  }
  t0_ = options_.env->Now();
  reports_->Start(start);
  if (start == total) return absl::OkStatus();
  absl::Status st = Stage(start);
  if (!st.ok()) return st;
  int64_t last = limit - 1;
  for (int64_t step = start; step < limit; ++step) {
    if (cancelled_ != nullptr && cancelled_->load()) {
      return absl::CancelledError("job cancelled");
    }
    st = Compute(step);
    // Stage the next batch once backward is enqueued (on a GPU it still runs).
    if (st.ok() && step + 1 < limit) st = Stage(step + 1);
    // The previous step's loss: reading it waits for that step only, so the
    // host stays a step ahead of the device.
    if (st.ok() && step > start) st = StepDone(step - 1);
    if (st.ok()) st = ApplyThrough(step - depth);
    if (!st.ok()) return st;
    if (job_wide) {
      job_pushes_ = sync_->JobPushesApplied();  // depth 0: step's answers are in
      if (job_pushes_ >= budget) {
        last = step;
        break;
      }
    }
  }
  steps_run_ = last + 1;
  st = StepDone(last, /*last=*/true);
  if (!st.ok()) return st;
  return ApplyThrough(last);
}

absl::Status TrainingRun::Stage(int64_t step) {
  TraceSpan span(trace_.get(), "stage batch", "data", kTraceTrain, step);
  plan_->Gather(step);
  return model_->StageBatch(plan_->x(), plan_->y(), plan_->batch());
}

absl::Status TrainingRun::Compute(int64_t step) {
  if (predict_) {
    TraceSpan span(trace_.get(), "predict parameters", "compute", kTraceTrain, step);
    absl::Status st = model_->PredictParams(static_cast<float>(sync_->pipeline_depth()));
    if (!st.ok()) return st;
  }
  absl::Status st = ForwardBackward(step);
  if (predict_) {
    // Host models have finished backward here (a device model would need
    // the restore ordered after it; none predicts).
    TraceSpan span(trace_.get(), "restore parameters", "compute", kTraceTrain, step);
    absl::Status restored = model_->RestoreParams();
    if (st.ok()) st = restored;
  }
  return st;
}

absl::Status TrainingRun::ForwardBackward(int64_t step) {
  const absl::Time began = options_.env->Now();
  absl::Cleanup slow = [&] {
    if (options_.compute_slowdown > 1.0) {
      TraceSpan span(trace_.get(), "slowdown", "compute", kTraceTrain, step);
      options_.env->SleepFor((options_.env->Now() - began) *
                             (options_.compute_slowdown - 1.0));
    }
  };
  TraceSpan span(trace_.get(), "forward+backward", "compute", kTraceTrain, step);
  absl::Status failed;
  absl::Status st = model_->ForwardBackward(plan_->batch(), [&](int b) {
    if (!failed.ok()) return;
    TraceInstant(trace_.get(), "bucket ready", "compute", kTraceTrain, step, b);
    if (own_gradient_) return;  // ApplyThrough applies it in place
    // Start the bucket's copy off the device now, not when the network is
    // free; the communication threads wait for it.
    failed = b >= 0 && b < static_cast<int>(buckets_.size())
                 ? model_->StartGradCopy(b, comm_->slot_index(step),
                                         comm_->slot(step) + buckets_[b].begin)
                 : absl::InternalError(absl::StrCat("model reported bucket ", b));
    if (failed.ok()) comm_->Enqueue(step, b);
  });
  return st.ok() ? failed : st;
}

absl::Status TrainingRun::StepDone(int64_t step, bool last) {
  TraceSpan span(trace_.get(), "loss + report", "train", kTraceTrain, step);
  absl::StatusOr<float> loss = model_->TakeLoss();
  if (!loss.ok()) return loss.status();
  if (!std::isfinite(*loss)) {
    return absl::OutOfRangeError(absl::StrCat("loss became ", *loss, " at step ", step,
                                              " (learning rate too high?)"));
  }
  return reports_->StepDone(
      step, *loss, comm_->busy_seconds(), ComputeSeconds(),
      [this] { return TestAccuracy(); }, job_pushes_, last);
}

absl::Status TrainingRun::ApplyThrough(int64_t upto) {
  // With own_gradient_ the model holds one gradient, that of the step
  // computed last (depth 0: `upto`), and there is nothing to wait for.
  if (own_gradient_ && applied_ < upto) {
    return absl::InternalError(
        absl::StrCat("applying steps ", applied_, "..", upto, " from one gradient"));
  }
  for (; applied_ <= upto; ++applied_) {
    absl::Status st;
    if (!own_gradient_) {
      const absl::Time w = options_.env->Now();
      {
        TraceSpan wait(trace_.get(), "wait comm", "wait", kTraceTrain, applied_);
        st = comm_->WaitSynced(applied_);
      }
      exposed_ += absl::ToDoubleSeconds(options_.env->Now() - w);
      if (!st.ok()) return st;
    }
    TraceSpan span(trace_.get(), "optimizer", "optimizer", kTraceTrain, applied_);
    const float* g = comm_->slot(applied_);
    for (size_t b = 0; b < buckets_.size(); ++b) {
      st = own_gradient_ ? model_->ApplyOwnGradient(static_cast<int>(b))
           : sync_->output() == Output::kAveragedGradient
               ? model_->ApplyGradient(b, g + buckets_[b].begin)
               : model_->SetParamsRange(buckets_[b], params_);
      if (!st.ok()) return st;
    }
    if (ckpt_ != nullptr && ckpt_->Due(applied_ + 1)) {
      st = StartCheckpoint(applied_ + 1);
      if (!st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

absl::Status TrainingRun::StartCheckpoint(int64_t steps) {
  TraceSpan span(trace_.get(), "checkpoint copy", "checkpoint", kTraceTrain, steps - 1);
  absl::StatusOr<AllreduceState*> buf = ckpt_->Buffer();
  if (!buf.ok()) return buf.status();
  (*buf)->params.resize(model_->num_params());
  absl::Status st = model_->GetParams((*buf)->params.data());
  if (st.ok()) st = model_->GetOptimizerState(&(*buf)->optimizer);
  if (st.ok()) ckpt_->Start(steps);
  return st;
}

absl::Status TrainingRun::Complete() {
  const size_t n = model_->num_params();
  const double comm_busy = comm_->busy_seconds();
  comm_->Stop();
  absl::Status st = ckpt_ != nullptr ? ckpt_->Wait() : absl::OkStatus();
  if (st.ok()) st = model_->GetParams(params_);
  if (st.ok()) st = sync_->Finish(params_);  // ps async: the newest parameters
  if (st.ok()) st = model_->SetParams(params_);
  if (!st.ok()) return st;
  out_.params.assign(params_, params_ + n);
  const double wall = absl::ToDoubleSeconds(options_.env->Now() - t0_);
  out_.done.comm_seconds = comm_busy;
  out_.done.exposed_comm_seconds = exposed_;
  for (const Range& b : buckets_) {
    out_.done.bucket_bytes.push_back(static_cast<int64_t>(b.size * sizeof(float)));
  }
  for (AllreduceAlgorithm algorithm : sync_->bucket_algorithms()) {
    out_.done.bucket_algorithms.emplace_back(AllreduceAlgorithmName(algorithm));
  }
  out_.done.compute_seconds = ComputeSeconds();
  st = RecordSuccess(
      job_, *plan_, steps_run_, *reports_, params_, n, wall, options_,
      [this] { return TestAccuracy(); }, &out_);
  if (!st.ok()) return st;
  spdlog::info(
      "{}done on {}: {} steps in {:.2f} s (comm busy {:.2f} s, "
      "exposed {:.2f} s), params {}",
      tag_, model_->name(), steps_run_, wall, comm_busy, exposed_,
      out_.done.param_checksum);
  return absl::OkStatus();
}

void TrainingRun::ExportTrace(bool keep) {
  if (trace_ == nullptr) return;
  model_->SetTrace(nullptr);
  if (comm_) comm_->Stop();  // its threads record too
  if (!keep) return;
  RankTrace& t = out_.done.trace.emplace();
  t.rank = job_.rank;
  t.dropped = trace_->dropped();
  t.events = trace_->Take();
}

absl::StatusOr<double> TrainingRun::TestAccuracy() {
  if (test_.n == 0) return -1.0;
  absl::StatusOr<EvalResult> ev =
      model_->Evaluate(test_.images.data(), test_.labels.data(), test_.n);
  if (!ev.ok()) return ev.status();
  return ev->accuracy();
}

}  // namespace

TrainingOutcome RunTraining(const JobOptions& job, const Dataset& train,
                            const Dataset& test, DeviceModel* model, GradientSync* sync,
                            TrainingReporter* reporter,
                            const std::atomic<bool>* cancelled,
                            const TrainingOptions& options) {
  return TrainingRun(job, train, test, model, sync, reporter, cancelled, options).Run();
}

}  // namespace gradsync
