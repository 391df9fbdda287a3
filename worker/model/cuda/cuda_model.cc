#include "worker/model/cuda/cuda_model.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/model/cuda/cuda_backend.h"
#include "worker/model/cuda/cuda_handles.h"

namespace gradsync {
namespace cuda {
namespace {

using internal::CudaStatus;
using internal::DeviceArray;
using internal::Event;
using internal::Stream;

// DeviceModel on one GPU: CudaMlp for the math, a second stream for
// device-to-host copies of gradient buckets, one CudaOptimizer per bucket.
//
// Threading: the training thread calls everything except WaitGradCopy,
// which the copy thread calls. WaitGradCopy reads only buckets_,
// grad_slots_ and copied_, which Configure writes before the training loop
// starts its communication threads (thread start orders the two); the CUDA
// calls on an event from two threads are thread-safe.
//
// Ordering on the device (no host waits between steps):
//  - gradient copies: StartGradCopy(b, k) records computed_[b] on the
//    compute stream, the copy stream waits for it and copies bucket b into
//    the host slot, then records copied_[b][k]. Before the next backward
//    writes the first (highest) layer of bucket b, the compute stream waits
//    for copied_[b][last slot copied]; copies on the copy stream complete in
//    order, so all earlier copies out of bucket b are done too;
//  - ApplyGradient / SetParamsRange upload on the compute stream, so the next
//    forward sees them, and every later gradient copy (enqueued behind a
//    later backward) is ordered after the upload has read host memory;
//  - staging and loss reads: see CudaMlp.
class CudaModel final : public DeviceModel {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceModel>> Create(const MlpSpec& spec,
                                                             int device, bool tf32,
                                                             int max_batch) {
    absl::StatusOr<std::unique_ptr<CudaMlp>> mlp =
        CudaMlp::Create(spec, device, tf32, max_batch);
    if (!mlp.ok()) return mlp.status();
    auto m = std::unique_ptr<CudaModel>(new CudaModel(std::move(*mlp), device));
    absl::StatusOr<Stream> copy = Stream::Create();
    if (!copy.ok()) return copy.status();
    m->grad_copy_ = std::move(*copy);
    absl::StatusOr<DeviceArray<float>> avg =
        DeviceArray<float>::Allocate(m->mlp_->num_params(), "the averaged gradient");
    if (!avg.ok()) return avg.status();
    m->avg_ = std::move(*avg);
    return std::unique_ptr<DeviceModel>(std::move(m));
  }

  // Lets the device finish everything that reads or writes the buffers
  // freed below (optimizer steps on the compute stream, gradient copies);
  // mlp_, declared first, is destroyed last and waits for its own streams.
  ~CudaModel() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(compute());
    grad_copy_.SynchronizeQuietly();
  }
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  std::string name() const override {
    return absl::StrCat("cuda:", device_, " ", DeviceName(device_));
  }
  size_t num_params() const override { return mlp_->num_params(); }
  int num_layers() const override { return mlp_->num_layers(); }
  Range LayerRange(int l) const override { return mlp_->LayerRange(l); }

  // Maps layers to buckets and checks that the buckets are whole layers,
  // last layers first, covering every parameter (bucket_ready(b) is
  // announced when bucket b's lowest layer is done, in backward order).
  absl::Status MapLayers(const std::vector<Range>& buckets,
                         std::vector<int>* bucket_of_layer, std::vector<int>* top,
                         std::vector<int>* bottom) const;
  absl::Status Configure(const std::vector<Range>& buckets,
                         const OptimizerOptions& optimizer, int grad_slots) override;

  absl::Status SetParams(const float* host) override { return mlp_->UploadParams(host); }
  absl::Status SetParamsRange(Range r, const float* host) override {
    if (r.begin > num_params() || r.size > num_params() - r.begin) {
      return absl::OutOfRangeError(absl::StrCat("SetParamsRange: [", r.begin, ", +",
                                                r.size, ") exceeds ", num_params(),
                                                " parameters"));
    }
    absl::Status st = MakeCurrent();
    if (!st.ok()) return st;
    return CudaStatus(
        cudaMemcpyAsync(mlp_->params() + r.begin, host + r.begin, r.size * sizeof(float),
                        cudaMemcpyHostToDevice, compute()),
        "uploading a parameter range (SetParamsRange)");
  }
  absl::Status GetParams(float* host) override { return mlp_->DownloadParams(host); }
  absl::Status StageBatch(const float* x, const uint8_t* y, int batch) override {
    return mlp_->StageBatch(x, y, batch);
  }

  absl::Status ForwardBackward(int batch,
                               const std::function<void(int)>& bucket_ready) override;

  absl::StatusOr<float> TakeLoss() override { return mlp_->TakeLoss(); }

  absl::Status StartGradCopy(int bucket, int slot, float* host) override;
  absl::Status WaitGradCopy(int bucket, int slot) override;
  absl::Status ApplyGradient(int bucket, const float* host) override;
  absl::Status ApplyOwnGradient(int bucket) override;

  absl::StatusOr<EvalResult> Evaluate(const float* x, const uint8_t* y,
                                      int64_t n) override {
    absl::StatusOr<std::pair<double, int64_t>> r = mlp_->Evaluate(x, y, n);
    if (!r.ok()) return r.status();
    EvalResult e;
    e.mean_loss = r->first;
    e.correct = r->second;
    e.n = std::max<int64_t>(n, 0);
    return e;
  }

  // Pinned memory. The deleter first waits for the device: a copy into or
  // out of the buffer may still be in flight when a failed training run
  // drops it.
  absl::StatusOr<std::shared_ptr<float>> AllocHost(size_t floats) override {
    absl::Status st = MakeCurrent();
    if (!st.ok()) return st;
    void* p = nullptr;
    st = CudaStatus(cudaMallocHost(&p, std::max<size_t>(floats, 1) * sizeof(float)),
                    absl::StrCat("allocating ", floats, " floats of pinned host memory"));
    if (!st.ok()) return st;
    const int device = device_;
    return std::shared_ptr<float>(static_cast<float*>(p), [device](float* q) {
      int previous = -1;
      const bool restore = cudaGetDevice(&previous) == cudaSuccess;
      cudaSetDevice(device);
      cudaDeviceSynchronize();
      cudaFreeHost(q);
      if (restore) cudaSetDevice(previous);
    });
  }

 private:
  CudaModel(std::unique_ptr<CudaMlp> mlp, int device)
      : mlp_(std::move(mlp)), device_(device) {}

  cudaStream_t compute() { return static_cast<cudaStream_t>(mlp_->compute_stream()); }
  // The device was checked at Create: only make it current on this thread.
  absl::Status MakeCurrent() {
    return CudaStatus(cudaSetDevice(device_),
                      absl::StrCat("making device ", device_, " current"));
  }
  absl::Status CheckBucketSlot(int bucket, int slot) const;
  Event& Copied(int bucket, int slot) {
    return copied_[static_cast<size_t>(bucket) * grad_slots_ + slot];
  }

  // Constant after Create. mlp_ first: destroyed last.
  std::unique_ptr<CudaMlp> mlp_;
  const int device_;
  Stream grad_copy_;        // device-to-host copies of gradient buckets
  DeviceArray<float> avg_;  // averaged gradients uploaded by ApplyGradient

  // Set by Configure, then constant while training runs.
  std::vector<Range> buckets_;
  int grad_slots_ = 0;
  std::vector<CudaOptimizer> optimizers_;  // per bucket
  std::vector<int> bucket_of_layer_;       // per layer
  std::vector<int> top_layer_;             // per bucket: written first
  std::vector<int> bottom_layer_;          // per bucket: written last
  std::vector<Event> computed_;            // per bucket, on the compute stream
  std::vector<Event> copied_;              // [bucket * grad_slots_ + slot]

  // Training thread only: the slot last copied from each bucket, -1 = none.
  std::vector<int> last_copy_slot_;
};

absl::Status CudaModel::MapLayers(const std::vector<Range>& buckets,
                                  std::vector<int>* bucket_of_layer_out,
                                  std::vector<int>* top_out,
                                  std::vector<int>* bottom_out) const {
  // Buckets must be whole layers, last layers first, covering every
  // parameter: bucket_ready(b) is announced when bucket b's lowest layer is
  // done, in the backward order.
  const int layers = num_layers();
  std::vector<int>& bucket_of_layer = *bucket_of_layer_out;
  std::vector<int>& top = *top_out;
  std::vector<int>& bottom = *bottom_out;
  bucket_of_layer.assign(layers, -1);
  top.assign(buckets.size(), -1);
  bottom.assign(buckets.size(), -1);
  size_t end = num_params();
  for (size_t b = 0; b < buckets.size(); ++b) {
    const Range& r = buckets[b];
    if (r.size == 0 || r.end() != end) {
      return absl::InvalidArgumentError(
          absl::StrCat("Configure: bucket ", b, " [", r.begin, ", +", r.size,
                       ") does not end where the previous one begins (", end, ")"));
    }
    for (int l = 0; l < layers; ++l) {
      const Range lr = LayerRange(l);
      if (lr.begin >= r.begin && lr.end() <= r.end()) {
        bucket_of_layer[l] = static_cast<int>(b);
        top[b] = std::max(top[b], l);
        bottom[b] = bottom[b] < 0 ? l : std::min(bottom[b], l);
      }
    }
    if (bottom[b] < 0 || LayerRange(bottom[b]).begin != r.begin) {
      return absl::InvalidArgumentError(
          absl::StrCat("Configure: bucket ", b, " [", r.begin, ", +", r.size,
                       ") does not start at a layer boundary"));
    }
    end = r.begin;
  }
  if (end != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Configure: the buckets leave parameters [0, ", end, ") uncovered"));
  }
  return absl::OkStatus();
}

absl::Status CudaModel::Configure(const std::vector<Range>& buckets,
                                  const OptimizerOptions& optimizer, int grad_slots) {
  if (grad_slots < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Configure: grad_slots must be >= 1, got ", grad_slots));
  }
  std::vector<int> bucket_of_layer, top, bottom;
  absl::Status st = MapLayers(buckets, &bucket_of_layer, &top, &bottom);
  if (!st.ok()) return st;
  st = MakeCurrent();
  // Copies of an earlier configuration must not outlive its events.
  if (st.ok()) {
    st = CudaStatus(cudaStreamSynchronize(compute()),
                    "finishing compute work before Configure");
  }
  if (st.ok()) {
    st = CudaStatus(cudaStreamSynchronize(grad_copy_.get()),
                    "finishing gradient copies before Configure");
  }
  if (!st.ok()) return st;

  std::vector<CudaOptimizer> optimizers;
  std::vector<Event> computed, copied;
  for (size_t b = 0; b < buckets.size(); ++b) {
    // Zeroed on the compute stream, where ApplyGradient runs it.
    absl::StatusOr<CudaOptimizer> o =
        CudaOptimizer::Create(optimizer, buckets[b].size, compute());
    if (!o.ok()) return o.status();
    optimizers.push_back(std::move(*o));
    // One "computed" event (streams wait on it), grad_slots "copied" ones
    // (the copy thread waits on them).
    absl::StatusOr<Event> e = Event::Create(Event::Use::kDeviceOnly);
    if (!e.ok()) return e.status();
    computed.push_back(std::move(*e));
    for (int k = 0; k < grad_slots; ++k) {
      e = Event::Create(Event::Use::kHostWaited);
      if (!e.ok()) return e.status();
      copied.push_back(std::move(*e));
    }
  }
  buckets_ = buckets;
  grad_slots_ = grad_slots;
  optimizers_ = std::move(optimizers);
  bucket_of_layer_ = std::move(bucket_of_layer);
  top_layer_ = std::move(top);
  bottom_layer_ = std::move(bottom);
  computed_ = std::move(computed);
  copied_ = std::move(copied);
  last_copy_slot_.assign(buckets.size(), -1);
  return absl::OkStatus();
}

absl::Status CudaModel::ForwardBackward(int batch,
                                        const std::function<void(int)>& bucket_ready) {
  if (buckets_.empty()) {
    return absl::FailedPreconditionError("ForwardBackward before Configure (no buckets)");
  }
  CudaMlp::BackwardHooks hooks;
  // Bucket b's gradient is about to be overwritten: the compute stream waits
  // (on the GPU) for the last copy out of it.
  hooks.before_layer_grad = [this](int l) -> absl::Status {
    const int b = bucket_of_layer_[l];
    if (l != top_layer_[b] || last_copy_slot_[b] < 0) return absl::OkStatus();
    return CudaStatus(
        cudaStreamWaitEvent(compute(), Copied(b, last_copy_slot_[b]).get(), 0),
        absl::StrCat("ordering the backward after the copy of bucket ", b));
  };
  // Bucket b is complete once its lowest layer is enqueued.
  hooks.after_layer_grad = [this, &bucket_ready](int l) -> absl::Status {
    const int b = bucket_of_layer_[l];
    if (l == bottom_layer_[b] && bucket_ready) bucket_ready(b);
    return absl::OkStatus();
  };
  return mlp_->ForwardBackward(batch, hooks);
}

absl::Status CudaModel::CheckBucketSlot(int bucket, int slot) const {
  if (buckets_.empty()) {
    return absl::FailedPreconditionError("gradient copy before Configure");
  }
  if (bucket < 0 || bucket >= static_cast<int>(buckets_.size()) || slot < 0 ||
      slot >= grad_slots_) {
    return absl::InvalidArgumentError(absl::StrCat("no (bucket ", bucket, ", slot ", slot,
                                                   "): ", buckets_.size(), " buckets, ",
                                                   grad_slots_, " slots"));
  }
  return absl::OkStatus();
}

// 1. computed_[b] marks the end of bucket b's backward on the compute stream;
// 2. the copy stream waits for it (on the GPU) and copies the bucket into
//    `host`;
// 3. copied_[b][slot] marks the end of the copy, for WaitGradCopy and for
//    the next backward that overwrites bucket b.
absl::Status CudaModel::StartGradCopy(int bucket, int slot, float* host) {
  absl::Status st = CheckBucketSlot(bucket, slot);
  if (st.ok()) st = MakeCurrent();
  if (!st.ok()) return st;
  const Range& r = buckets_[bucket];
  const std::string what =
      absl::StrCat("copying gradient bucket ", bucket, " to host slot ", slot);
  st = CudaStatus(cudaEventRecord(computed_[bucket].get(), compute()), what);
  if (st.ok()) {
    st = CudaStatus(cudaStreamWaitEvent(grad_copy_.get(), computed_[bucket].get(), 0),
                    what);
  }
  if (st.ok()) {
    st = CudaStatus(cudaMemcpyAsync(host, mlp_->grad() + r.begin, r.size * sizeof(float),
                                    cudaMemcpyDeviceToHost, grad_copy_.get()),
                    what);
  }
  if (st.ok()) {
    st = CudaStatus(cudaEventRecord(Copied(bucket, slot).get(), grad_copy_.get()), what);
  }
  if (st.ok()) last_copy_slot_[bucket] = slot;
  return st;
}

// Copy thread. Blocks (asleep, with blocking synchronisation) until the
// copy last started into (bucket, slot) has completed. A GPU that hangs
// hangs this call: CUDA has no timed wait on an event.
absl::Status CudaModel::WaitGradCopy(int bucket, int slot) {
  absl::Status st = CheckBucketSlot(bucket, slot);
  if (st.ok()) st = MakeCurrent();
  if (!st.ok()) return st;
  return CudaStatus(cudaEventSynchronize(Copied(bucket, slot).get()),
                    absl::StrCat("waiting for the copy of gradient bucket ", bucket,
                                 " to host slot ", slot));
}

// Uploads the averaged bucket and runs its optimizer on the compute stream,
// after the backward pass that still reads the parameters and before the
// next forward.
absl::Status CudaModel::ApplyGradient(int bucket, const float* host) {
  absl::Status st = CheckBucketSlot(bucket, 0);
  if (st.ok()) st = MakeCurrent();
  if (!st.ok()) return st;
  const Range& r = buckets_[bucket];
  st = CudaStatus(cudaMemcpyAsync(avg_.get() + r.begin, host, r.size * sizeof(float),
                                  cudaMemcpyHostToDevice, compute()),
                  absl::StrCat("uploading the averaged gradient of bucket ", bucket));
  if (!st.ok()) return st;
  return optimizers_[bucket].Apply(mlp_->params() + r.begin, avg_.get() + r.begin,
                                   compute());
}

// The gradient stays in the model's gradient buffer: the optimizer reads it
// on the compute stream, behind the backward that wrote it and ahead of the
// next backward that overwrites it.
absl::Status CudaModel::ApplyOwnGradient(int bucket) {
  absl::Status st = CheckBucketSlot(bucket, 0);
  if (st.ok()) st = MakeCurrent();
  if (!st.ok()) return st;
  const Range& r = buckets_[bucket];
  return optimizers_[bucket].Apply(mlp_->params() + r.begin, mlp_->grad() + r.begin,
                                   compute());
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceModel>> MakeCudaModel(const MlpSpec& spec,
                                                           int device, bool allow_tf32,
                                                           int max_batch) {
  const int count = DeviceCount();
  if (device < 0 || device >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("GPU ", device, " does not exist (", count, " visible)"));
  }
  // CudaMlp::Create switches the device to blocking synchronisation before
  // anything else runs on it.
  return CudaModel::Create(spec, device, allow_tf32, max_batch);
}

}  // namespace cuda
}  // namespace gradsync
