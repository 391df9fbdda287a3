#include "worker/train/comm_pipeline.h"

#include <utility>

#include "absl/time/clock.h"

namespace gradsync {

CommPipeline::CommPipeline(DeviceModel* model, GradientSync* sync,
                           std::vector<Range> buckets,
                           std::vector<std::shared_ptr<float>> grad_slots,
                           float* params_host)
    : model_(model),
      sync_(sync),
      buckets_(std::move(buckets)),
      grad_slots_(std::move(grad_slots)),
      params_host_(params_host) {
  thread_ = std::thread([this] { Loop(); });
}

CommPipeline::~CommPipeline() { Stop(); }

void CommPipeline::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void CommPipeline::Enqueue(int64_t step, int bucket) {
  absl::MutexLock lock(&mu_);
  steps_[step];  // a step with no bucket done yet is known, not finished
  queue_.emplace_back(step, bucket);
}

absl::Status CommPipeline::WaitCopied(int64_t step) {
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

absl::Status CommPipeline::WaitSynced(int64_t step) {
  absl::MutexLock lock(&mu_);
  auto done = [this, step]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (!error_.ok()) return true;
    auto it = steps_.find(step);
    return it != steps_.end() &&
           it->second.synced == static_cast<int>(buckets_.size());
  };
  mu_.Await(absl::Condition(&done));
  if (!error_.ok()) return error_;
  steps_.erase(step);
  return absl::OkStatus();
}

double CommPipeline::busy_seconds() {
  absl::MutexLock lock(&mu_);
  return busy_;
}

void CommPipeline::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (error_.ok()) error_ = status;
}

void CommPipeline::Loop() {
  while (true) {
    int64_t step;
    int bucket;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return stop_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      if (!error_.ok()) {
        queue_.clear();
        continue;
      }
      std::tie(step, bucket) = queue_.front();
      queue_.pop_front();
    }
    Process(step, bucket);
  }
}

void CommPipeline::Process(int64_t step, int bucket) {
  const absl::Time t0 = absl::Now();
  float* g = slot(step);
  absl::Status st = model_->CopyGradToHost(bucket, g + buckets_[bucket].begin);
  {
    absl::MutexLock lock(&mu_);
    ++steps_[step].copied;
    if (!st.ok() && error_.ok()) error_ = st;
  }
  if (st.ok()) st = sync_->SyncBucket(step, bucket, g, params_host_);
  absl::MutexLock lock(&mu_);
  busy_ += absl::ToDoubleSeconds(absl::Now() - t0);
  if (!st.ok()) {
    if (error_.ok()) error_ = st;
    return;
  }
  ++steps_[step].synced;
}

}  // namespace gradsync
