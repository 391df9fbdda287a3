#include "worker/train/device_trainer.h"

#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <thread>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/kernels.h"
#include "common/logging.h"
#include "common/spec/job_spec.h"
#include "worker/train/training_steps.h"

namespace gradsync {
namespace {

using BucketOutput = GradientSync::BucketOutput;

// The communication thread and the bookkeeping it shares with the trainer.
class CommPipeline {
 public:
  CommPipeline(DeviceModel* model, GradientSync* sync,
               const std::vector<Range>& buckets,
               std::vector<std::shared_ptr<float>> grad_slots, float* params_host)
      : model_(model),
        sync_(sync),
        buckets_(buckets),
        grad_slots_(std::move(grad_slots)),
        params_host_(params_host) {
    thread_ = std::thread([this] { Loop(); });
  }

  ~CommPipeline() { Stop(); }

  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }

  float* slot(int64_t step) {
    return grad_slots_[step % grad_slots_.size()].get();
  }

  void Enqueue(int64_t step, int bucket) {
    absl::MutexLock lock(&mu_);
    auto& s = steps_[step];
    if (s.kinds.empty()) s.kinds.resize(buckets_.size());
    queue_.emplace_back(step, bucket);
  }

  // Waits until all buckets of `step` have been copied off the device.
  absl::Status WaitCopied(int64_t step) {
    absl::MutexLock lock(&mu_);
    auto done = [this, step]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (!error_.ok()) return true;
      auto it = steps_.find(step);
      return it == steps_.end() ||
             it->second.copied == static_cast<int>(buckets_.size());
    };
    mu_.Await(absl::Condition(&done));
    return error_;
  }

  // Waits for all of `step`'s results and hands their kinds over.
  absl::StatusOr<std::vector<BucketOutput>> WaitSynced(int64_t step) {
    absl::MutexLock lock(&mu_);
    auto done = [this, step]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (!error_.ok()) return true;
      auto it = steps_.find(step);
      return it != steps_.end() &&
             it->second.synced == static_cast<int>(buckets_.size());
    };
    mu_.Await(absl::Condition(&done));
    if (!error_.ok()) return error_;
    std::vector<BucketOutput> kinds = std::move(steps_[step].kinds);
    steps_.erase(step);
    return kinds;
  }

  double busy_seconds() {
    absl::MutexLock lock(&mu_);
    return busy_;
  }

  void Fail(const absl::Status& st) {
    absl::MutexLock lock(&mu_);
    if (error_.ok()) error_ = st;
  }

 private:
  struct StepState {
    int copied = 0;
    int synced = 0;
    std::vector<BucketOutput> kinds;
  };

  void Loop() {
    while (true) {
      int64_t step;
      int b;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return stop_ || !queue_.empty();
        };
        mu_.Await(absl::Condition(&ready));
        if (queue_.empty() || !error_.ok()) {
          if (stop_) return;
          queue_.clear();
          continue;
        }
        std::tie(step, b) = queue_.front();
        queue_.pop_front();
      }
      const absl::Time t0 = absl::Now();
      float* g = slot(step);
      absl::Status st = model_->CopyGradToHost(b, g + buckets_[b].begin);
      {
        absl::MutexLock lock(&mu_);
        ++steps_[step].copied;
        if (!st.ok() && error_.ok()) error_ = st;
      }
      absl::StatusOr<BucketOutput> out =
          st.ok() ? sync_->SyncBucket(step, b, g, params_host_) : st;
      absl::MutexLock lock(&mu_);
      busy_ += absl::ToDoubleSeconds(absl::Now() - t0);
      if (!out.ok()) {
        if (error_.ok()) error_ = out.status();
        continue;
      }
      StepState& s = steps_[step];
      s.kinds[b] = *out;
      ++s.synced;
    }
  }

  DeviceModel* const model_;
  GradientSync* const sync_;
  const std::vector<Range> buckets_;
  const std::vector<std::shared_ptr<float>> grad_slots_;
  float* const params_host_;

  absl::Mutex mu_;
  std::deque<std::pair<int64_t, int>> queue_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, StepState> steps_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  double busy_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace

TrainingOutcome RunDeviceTraining(const v1::Assignment& a, const Dataset& train,
                                  const Dataset& test, DeviceModel* model,
                                  GradientSync* sync, TrainingReporter* reporter,
                                  const std::atomic<bool>* cancelled,
                                  const TrainingOptions& options) {
  TrainingOutcome out = NewOutcome(a, model->name());
  const v1::JobSpec& spec = a.spec();
  const std::string tag = JobTag(a.job_id(), a.rank());
  std::unique_ptr<CommPipeline> comm;
  auto fail = [&](absl::Status st) {
    sync->Abort(st);
    if (comm) {
      comm->Fail(st);
      comm->Stop();
    }
    RecordFailure(st, &out);
    return out;
  };

  absl::StatusOr<MlpSpec> mspec = ParseModelSpec(spec.model());
  if (!mspec.ok()) return fail(mspec.status());
  const size_t n = model->num_params();
  if (mspec->widths.front() != train.features) {
    return fail(absl::InvalidArgumentError("model: input width does not match the data"));
  }
  const std::vector<Range> buckets = MakeBuckets(*model, spec.bucket_bytes());
  absl::Status st = model->Configure(buckets, OptimizerFromSpec(spec));
  if (st.ok()) st = sync->ConfigureBuckets(buckets);
  if (!st.ok()) return fail(st);
  const int depth = sync->pipeline_depth();
  std::vector<std::shared_ptr<float>> slots;
  for (int i = 0; i < depth + 2; ++i) {
    auto buf = model->AllocHost(n);
    if (!buf.ok()) return fail(buf.status());
    slots.push_back(*buf);
  }
  auto params_buf = model->AllocHost(n);
  if (!params_buf.ok()) return fail(params_buf.status());
  float* params = params_buf->get();

  Mlp(*mspec).InitParams(spec.seed(), params);
  st = sync->Initialize(params);
  if (st.ok()) st = model->SetParams(params);
  if (!st.ok()) return fail(st);
  const std::string init_sum = ChecksumHex(params, n);
  spdlog::info("{}{}: initial parameters {} ({} floats, {} buckets, depth {})",
               tag, model->name(), init_sum, n, buckets.size(), depth);

  absl::StatusOr<StepPlan> plan = StepPlan::Make(a, train);
  if (!plan.ok()) return fail(plan.status());
  const int64_t total = plan->total();
  const int batch = plan->batch();
  auto stage = [&](int64_t step) {
    plan->Gather(step);
    return model->StageBatch(plan->x(), plan->y(), batch);
  };
  StepReports reports(a, *plan, init_sum, reporter, options);
  auto test_accuracy = [&]() -> absl::StatusOr<double> {
    if (test.n == 0) return -1.0;
    auto ev = model->Evaluate(test.images.data(), test.labels.data(), test.n);
    if (!ev.ok()) return ev.status();
    return ev->accuracy();
  };

  comm = std::make_unique<CommPipeline>(model, sync, buckets, slots, params);
  double exposed = 0;
  int64_t applied = 0;
  const absl::Time t0 = absl::Now();
  auto compute_seconds = [&] {
    return std::max(0.0, absl::ToDoubleSeconds(absl::Now() - t0) - exposed -
                             reports.eval_seconds());
  };
  // Applies every finished step up to `upto` to the model.
  auto apply_through = [&](int64_t upto) -> absl::Status {
    for (; applied <= upto; ++applied) {
      const absl::Time w = absl::Now();
      absl::StatusOr<std::vector<BucketOutput>> kinds = comm->WaitSynced(applied);
      exposed += absl::ToDoubleSeconds(absl::Now() - w);
      if (!kinds.ok()) return kinds.status();
      float* g = comm->slot(applied);
      for (size_t b = 0; b < buckets.size(); ++b) {
        absl::Status s = (*kinds)[b] == BucketOutput::kAveragedGradient
                             ? model->ApplyGradient(b, g + buckets[b].begin)
                             : model->SetParamsRange(buckets[b], params);
        if (!s.ok()) return s;
      }
    }
    return absl::OkStatus();
  };
  reports.Start();

  st = stage(0);
  if (!st.ok()) return fail(st);
  for (int64_t step = 0; step < total; ++step) {
    if (cancelled != nullptr && cancelled->load()) {
      return fail(absl::CancelledError("job cancelled"));
    }
    if (step > 0) {
      const absl::Time w = absl::Now();
      st = comm->WaitCopied(step - 1);
      exposed += absl::ToDoubleSeconds(absl::Now() - w);
      if (!st.ok()) return fail(st);
    }
    absl::Status stage_status;
    absl::StatusOr<float> loss = model->ForwardBackward(batch, [&](int b) {
      comm->Enqueue(step, b);
      // Stage the next batch while the device finishes this one.
      if (b == 0 && step + 1 < total) stage_status = stage(step + 1);
    });
    if (!loss.ok()) return fail(loss.status());
    if (!stage_status.ok()) return fail(stage_status);
    if (!std::isfinite(*loss)) {
      return fail(absl::OutOfRangeError(absl::StrCat(
          "loss became ", *loss, " at step ", step, " (learning rate too high?)")));
    }
    st = apply_through(step - depth);
    if (!st.ok()) return fail(st);
    st = reports.StepDone(step, *loss, exposed, compute_seconds(), test_accuracy);
    if (!st.ok()) return fail(st);
  }
  st = apply_through(total - 1);
  if (!st.ok()) return fail(st);
  const double comm_busy = comm->busy_seconds();
  comm->Stop();
  st = model->GetParams(params);
  if (st.ok()) st = sync->Finish(params);  // ps async: the newest parameters
  if (st.ok()) st = model->SetParams(params);
  if (!st.ok()) return fail(st);
  out.params.assign(params, params + n);
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  out.done.set_comm_seconds(comm_busy);
  out.done.set_exposed_comm_seconds(exposed);
  out.done.set_compute_seconds(compute_seconds());
  st = RecordSuccess(a, *plan, reports, params, n, wall, options, test_accuracy,
                     &out);
  if (!st.ok()) return fail(st);
  spdlog::info("{}done on {}: {} steps in {:.2f} s (comm busy {:.2f} s, exposed "
               "{:.2f} s), params {}",
               tag, model->name(), total, wall, comm_busy, exposed,
               out.done.param_checksum());
  return out;
}

}  // namespace gradsync
