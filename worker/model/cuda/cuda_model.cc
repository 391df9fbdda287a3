#include "worker/model/cuda/cuda_model.h"

#include <cuda_runtime.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/model/cuda/cuda_backend.h"

namespace gradsync {
namespace cuda {
namespace {

absl::Status Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

class CudaModel final : public DeviceModel {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceModel>> Create(
      const MlpSpec& spec, int device, bool tf32, int max_batch) {
    absl::StatusOr<std::unique_ptr<CudaMlp>> mlp =
        CudaMlp::Create(spec, device, tf32, max_batch);
    if (!mlp.ok()) return mlp.status();
    auto m = std::unique_ptr<CudaModel>(new CudaModel(std::move(*mlp), device));
    absl::Status st = Check(
        cudaStreamCreateWithFlags(&m->copy_stream_, cudaStreamNonBlocking),
        "cudaStreamCreate");
    if (!st.ok()) return st;
    void* avg = nullptr;
    st = Check(cudaMalloc(&avg, m->mlp_->num_params() * sizeof(float)),
               "cudaMalloc(averaged gradient)");
    if (!st.ok()) return st;
    m->avg_ = static_cast<float*>(avg);
    return std::unique_ptr<DeviceModel>(std::move(m));
  }

  ~CudaModel() override {
    cudaSetDevice(device_);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
    if (avg_ != nullptr) cudaFree(avg_);
  }

  std::string name() const override {
    return absl::StrCat("cuda:", device_, " ", DeviceName(device_));
  }
  size_t num_params() const override { return mlp_->num_params(); }
  int num_layers() const override { return mlp_->num_layers(); }
  Range LayerRange(int l) const override { return mlp_->LayerRange(l); }

  absl::Status Configure(const std::vector<Range>& buckets,
                         const OptimizerOptions& optimizer) override {
    absl::Status st = SetDevice(device_);
    if (!st.ok()) return st;
    buckets_ = buckets;
    optimizers_.clear();
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    events_.assign(buckets.size(), nullptr);
    bucket_of_lowest_layer_.assign(mlp_->num_layers(), -1);
    for (size_t b = 0; b < buckets.size(); ++b) {
      absl::StatusOr<CudaOptimizer> o = CudaOptimizer::Create(optimizer, buckets[b].size);
      if (!o.ok()) return o.status();
      optimizers_.push_back(std::move(*o));
      st = Check(cudaEventCreateWithFlags(&events_[b], cudaEventDisableTiming),
                 "cudaEventCreate");
      if (!st.ok()) return st;
      // A bucket is complete when its lowest layer's gradient is enqueued
      // (backward runs from the last layer down).
      for (int l = 0; l < mlp_->num_layers(); ++l) {
        if (mlp_->LayerRange(l).begin == buckets[b].begin) {
          bucket_of_lowest_layer_[l] = static_cast<int>(b);
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status SetParams(const float* host) override {
    return mlp_->UploadParams(host);
  }
  absl::Status SetParamsRange(Range r, const float* host) override {
    absl::Status st = SetDevice(device_);
    if (!st.ok()) return st;
    return Check(cudaMemcpyAsync(mlp_->params() + r.begin, host + r.begin,
                                 r.size * sizeof(float), cudaMemcpyHostToDevice,
                                 Stream()),
                 "upload parameter range");
  }
  absl::Status GetParams(float* host) override {
    return mlp_->DownloadParams(host);
  }
  absl::Status StageBatch(const float* x, const uint8_t* y, int batch) override {
    return mlp_->StageBatch(x, y, batch);
  }

  absl::StatusOr<float> ForwardBackward(
      int batch, const std::function<void(int)>& bucket_ready) override {
    absl::Status failed;
    absl::StatusOr<float> loss = mlp_->ForwardBackward(batch, [&](int layer) {
      const int b = bucket_of_lowest_layer_[layer];
      if (b < 0) return;
      absl::Status st = Check(cudaEventRecord(events_[b], Stream()),
                              "cudaEventRecord");
      if (!st.ok()) {
        if (failed.ok()) failed = st;
        return;
      }
      bucket_ready(b);
    });
    if (!failed.ok()) return failed;
    return loss;
  }

  // Communication thread: waits for the bucket's event on the copy stream,
  // copies it to (pinned) host memory.
  absl::Status CopyGradToHost(int bucket, float* host) override {
    absl::Status st = SetDevice(device_);
    if (!st.ok()) return st;
    const Range& r = buckets_[bucket];
    st = Check(cudaStreamWaitEvent(copy_stream_, events_[bucket], 0),
               "cudaStreamWaitEvent");
    if (st.ok()) {
      st = Check(cudaMemcpyAsync(host, mlp_->grad() + r.begin,
                                 r.size * sizeof(float), cudaMemcpyDeviceToHost,
                                 copy_stream_),
                 "download gradient bucket");
    }
    if (st.ok()) st = Check(cudaStreamSynchronize(copy_stream_), "copy stream");
    return st;
  }

  // Uploads the averaged bucket and runs its optimizer on the compute stream
  // (ordered after the backward pass that still reads the parameters).
  absl::Status ApplyGradient(int bucket, const float* host) override {
    absl::Status st = SetDevice(device_);
    if (!st.ok()) return st;
    const Range& r = buckets_[bucket];
    st = Check(cudaMemcpyAsync(avg_ + r.begin, host, r.size * sizeof(float),
                               cudaMemcpyHostToDevice, Stream()),
               "upload averaged gradient");
    if (!st.ok()) return st;
    return optimizers_[bucket].Apply(mlp_->params() + r.begin, avg_ + r.begin,
                                     mlp_->compute_stream());
  }

  absl::StatusOr<Mlp::Eval> Evaluate(const float* x, const uint8_t* y,
                                     int64_t n) override {
    auto r = mlp_->Evaluate(x, y, n);
    if (!r.ok()) return r.status();
    Mlp::Eval e;
    e.mean_loss = r->first;
    e.correct = r->second;
    e.n = n;
    return e;
  }

  absl::StatusOr<std::shared_ptr<float>> AllocHost(size_t floats) override {
    absl::Status st = SetDevice(device_);
    if (!st.ok()) return st;
    void* p = nullptr;
    st = Check(cudaMallocHost(&p, std::max<size_t>(floats, 1) * sizeof(float)),
               "cudaMallocHost");
    if (!st.ok()) return st;
    return std::shared_ptr<float>(static_cast<float*>(p),
                                  [](float* q) { cudaFreeHost(q); });
  }

 private:
  CudaModel(std::unique_ptr<CudaMlp> mlp, int device)
      : mlp_(std::move(mlp)), device_(device) {}
  cudaStream_t Stream() { return static_cast<cudaStream_t>(mlp_->compute_stream()); }

  std::unique_ptr<CudaMlp> mlp_;
  const int device_;
  cudaStream_t copy_stream_ = nullptr;
  float* avg_ = nullptr;  // device buffer for averaged gradients
  std::vector<Range> buckets_;
  std::vector<CudaOptimizer> optimizers_;
  std::vector<cudaEvent_t> events_;
  std::vector<int> bucket_of_lowest_layer_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceModel>> MakeCudaModel(const MlpSpec& spec,
                                                           int device,
                                                           bool allow_tf32,
                                                           int max_batch) {
  if (device < 0 || device >= DeviceCount()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU ", device, " does not exist (", DeviceCount(), " visible)"));
  }
  return CudaModel::Create(spec, device, allow_tf32, max_batch);
}

}  // namespace cuda
}  // namespace gradsync
