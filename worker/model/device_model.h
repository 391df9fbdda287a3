// worker/model: model replicas and their data — the MLP on the CPU, the CUDA
// backend (cuda/), Fashion-MNIST, and the device factory.
//
// A model replica on a compute device, as the training loop sees it.
// Implementations: the CPU (Mlp + OpenBLAS, below) and CUDA
// (worker/model/cuda/cuda_model.cc). Gradients are exposed per bucket so that a
// communication thread can synchronise early buckets while backward runs.
#ifndef GRADSYNC_WORKER_MODEL_DEVICE_MODEL_H_
#define GRADSYNC_WORKER_MODEL_DEVICE_MODEL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/optimizer.h"
#include "common/partition.h"
#include "worker/model/mlp.h"

namespace gradsync {

// Threading: the training thread calls everything except CopyGradToHost,
// which the communication thread calls for the buckets of the latest
// ForwardBackward; the training loop does not start the next ForwardBackward
// before those copies have returned.
class DeviceModel {
 public:
  virtual ~DeviceModel() = default;

  virtual std::string name() const = 0;  // "cpu", "cuda:0 NVIDIA H100 ..."
  virtual size_t num_params() const = 0;
  virtual int num_layers() const = 0;
  virtual Range LayerRange(int l) const = 0;

  // Buckets (contiguous ranges, bucket 0 = last layers) and the optimizer
  // used by ApplyGradient, one state per bucket.
  virtual absl::Status Configure(const std::vector<Range>& buckets,
                                 const OptimizerOptions& optimizer) = 0;

  virtual absl::Status SetParams(const float* host) = 0;
  virtual absl::Status SetParamsRange(Range r, const float* host) = 0;
  virtual absl::Status GetParams(float* host) = 0;

  // Stages the next batch (on a GPU: copied while the current step computes).
  virtual absl::Status StageBatch(const float* x, const uint8_t* y,
                                  int batch) = 0;

  // Forward + backward on the staged batch; `bucket_ready(b)` once bucket b's
  // gradient is computed or enqueued, b = 0, 1, ... Returns the mean loss.
  virtual absl::StatusOr<float> ForwardBackward(
      int batch, const std::function<void(int bucket)>& bucket_ready) = 0;

  // Copies bucket b's gradient into host[0 .. bucket size), waiting for it
  // to be computed first.
  virtual absl::Status CopyGradToHost(int bucket, float* host) = 0;

  // Optimizer step of bucket b with the averaged gradient host[0..size).
  virtual absl::Status ApplyGradient(int bucket, const float* host) = 0;

  virtual absl::StatusOr<Mlp::Eval> Evaluate(const float* x, const uint8_t* y,
                                             int64_t n) = 0;

  // Host memory suited to this device's copies (pinned on a GPU).
  virtual absl::StatusOr<std::shared_ptr<float>> AllocHost(size_t floats) = 0;
};

// Groups layers, last first, into contiguous buckets of at most
// `bucket_bytes` (a layer larger than that gets a bucket of its own).
std::vector<Range> MakeBuckets(const DeviceModel& model, int64_t bucket_bytes);

absl::StatusOr<std::unique_ptr<DeviceModel>> MakeCpuModel(const MlpSpec& spec);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_DEVICE_MODEL_H_
