#include "worker/train/comm_pipeline.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/exception_status.h"
#include "common/kernels.h"

namespace gradsync {

CommPipeline::CommPipeline(DeviceModel* model, GradientSync* sync,
                           std::vector<Range> buckets,
                           std::vector<std::shared_ptr<float>> grad_slots,
                           float* params_host, TraceRecorder* trace, const Env* env)
    : model_(model),
      sync_(sync),
      buckets_(std::move(buckets)),
      grad_slots_(std::move(grad_slots)),
      params_host_(params_host),
      trace_(trace),
      env_(env) {
  copy_thread_ = std::thread([this] { CopyLoop(); });
  sync_thread_ = std::thread([this] { SyncLoop(); });
}

CommPipeline::~CommPipeline() { Stop(); }

void CommPipeline::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (copy_thread_.joinable()) copy_thread_.join();
  if (sync_thread_.joinable()) sync_thread_.join();
}

void CommPipeline::Enqueue(int64_t step, int bucket) {
  absl::MutexLock lock(&mu_);
  if (bucket < 0 || bucket >= static_cast<int>(buckets_.size())) {
    if (error_.ok()) {
      error_ = absl::InternalError(absl::StrCat("model reported bucket ", bucket, " of ",
                                                buckets_.size(), " at step ", step));
    }
    return;
  }
  steps_[step];  // a step with no bucket done yet is known, not finished
  copy_queue_.emplace_back(step, bucket);
}

absl::Status CommPipeline::WaitSynced(int64_t step) {
  absl::MutexLock lock(&mu_);
  auto done = [this, step]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (!error_.ok()) return true;
    auto it = steps_.find(step);
    return it != steps_.end() && it->second.synced == static_cast<int>(buckets_.size());
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

bool CommPipeline::Next(std::deque<std::pair<int64_t, int>>* queue, int64_t* step,
                        int* bucket) {
  absl::MutexLock lock(&mu_);
  while (true) {
    auto ready = [this, queue]()
                     ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_ || !queue->empty(); };
    mu_.Await(absl::Condition(&ready));
    if (stop_) return false;
    if (error_.ok()) break;
    queue->clear();  // failed: drop the work, wait for Stop
  }
  std::tie(*step, *bucket) = queue->front();
  queue->pop_front();
  return true;
}

void CommPipeline::CopyLoop() {
  int64_t step;
  int bucket;
  while (Next(&copy_queue_, &step, &bucket)) {
    const absl::Time t0 = env_->Now();
    absl::Status st;
    {
      TraceSpan span(trace_, "copy", "comm", kTraceCopy, step, bucket);
      // An exception fails the job through error_, not the process.
      st = GuardStatus("gradient copy",
                       [&] { return model_->WaitGradCopy(bucket, slot_index(step)); });
    }
    absl::MutexLock lock(&mu_);
    busy_ += absl::ToDoubleSeconds(env_->Now() - t0);
    if (!st.ok()) {
      if (error_.ok()) error_ = st;
      continue;
    }
    sync_queue_.emplace_back(step, bucket);
  }
}

void CommPipeline::SyncLoop() {
  int64_t step;
  int bucket;
  while (Next(&sync_queue_, &step, &bucket)) {
    const absl::Time t0 = env_->Now();
    absl::Status st;
    {
      TraceSpan span(trace_, "sync bucket", "comm", kTraceSync, step, bucket);
      st = GuardStatus("gradient sync", [&] {
        if (weight_ != 1.0f) {
          const Range& r = buckets_[bucket];
          Scale(slot(step) + r.begin, weight_, r.size);
        }
        return sync_->SyncBucket(step, bucket, slot(step), params_host_);
      });
    }
    absl::MutexLock lock(&mu_);
    busy_ += absl::ToDoubleSeconds(env_->Now() - t0);
    if (!st.ok()) {
      if (error_.ok()) error_ = st;
      continue;
    }
    ++steps_[step].synced;
  }
}

}  // namespace gradsync
