// The communication threads of the training loop: they take (step, bucket)
// pairs as backward produces them (the training thread has already started
// the bucket's copy off the device), wait for each copy (copy thread) and
// synchronise the bucket (sync thread), while the training thread goes on
// computing. Two threads so that step t's copies never wait behind step t-1's
// synchronisation: with pipeline depth s, s steps can be in flight.
#ifndef GRADSYNC_WORKER_TRAIN_COMM_PIPELINE_H_
#define GRADSYNC_WORKER_TRAIN_COMM_PIPELINE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "common/partition.h"
#include "common/trace/trace.h"
#include "worker/model/device_model.h"
#include "worker/sync/gradient_sync.h"

namespace gradsync {

// Threading: Enqueue, WaitSynced, busy_seconds, Fail and Stop are
// called by the training thread; the copy thread calls model->WaitGradCopy,
// the sync thread sync->SyncBucket (buckets in the order they were enqueued).
//
// Gradient slots: step t's buckets are copied into slot(t) = slots[t % K];
// the slot belongs to the communication thread from Enqueue(t, ·) until
// WaitSynced(t) returns, then to the training thread until step t + K is
// enqueued. The caller sizes K = pipeline depth + 2.
class CommPipeline {
 public:
  // Starts the threads. model, sync, params_host and trace (null = no
  // timeline; else a span per copy and per SyncBucket) must outlive the
  // pipeline, and so must `env` (the clock of the busy seconds).
  CommPipeline(DeviceModel* model, GradientSync* sync, std::vector<Range> buckets,
               std::vector<std::shared_ptr<float>> grad_slots, float* params_host,
               TraceRecorder* trace = nullptr, const Env* env = Env::Default());
  ~CommPipeline();  // Stop()

  CommPipeline(const CommPipeline&) = delete;
  CommPipeline& operator=(const CommPipeline&) = delete;

  // Scales each bucket's gradient by `w` before it is synchronised (an
  // elastic generation's uneven split of the global batch; StepPlan). Call
  // before the first Enqueue; 1 (the default) leaves gradients untouched.
  void SetGradientWeight(float w) { weight_ = w; }

  int slot_index(int64_t step) const {
    return static_cast<int>(step % static_cast<int64_t>(grad_slots_.size()));
  }
  float* slot(int64_t step) const { return grad_slots_[slot_index(step)].get(); }

  // Queues bucket `bucket` of `step` (called from bucket_ready). A bucket
  // index out of range fails the pipeline with INTERNAL.
  void Enqueue(int64_t step, int bucket);

  // Blocks until every bucket of `step` is synchronised, or the pipeline
  // failed (bounded: every SyncBucket has a deadline).
  absl::Status WaitSynced(int64_t step);

  // Seconds the threads spent copying and synchronising so far (summed).
  double busy_seconds();

  // Makes every wait return `status` (first failure wins); queued work is
  // dropped.
  void Fail(const absl::Status& status);

  // Ends the threads after the buckets in progress. Idempotent.
  void Stop();

 private:
  struct StepState {
    int synced = 0;
  };

  void CopyLoop();
  void SyncLoop();
  // Takes the next item of `queue` (false: stopping).
  bool Next(std::deque<std::pair<int64_t, int>>* queue, int64_t* step, int* bucket)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  DeviceModel* const model_;
  GradientSync* const sync_;
  const std::vector<Range> buckets_;
  float weight_ = 1.0f;  // set before the threads read it
  const std::vector<std::shared_ptr<float>> grad_slots_;
  float* const params_host_;
  TraceRecorder* const trace_;
  const Env* const env_;

  absl::Mutex mu_;
  std::deque<std::pair<int64_t, int>> copy_queue_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<int64_t, int>> sync_queue_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, StepState> steps_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  double busy_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread copy_thread_;  // started last, joined in Stop
  std::thread sync_thread_;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_TRAIN_COMM_PIPELINE_H_
