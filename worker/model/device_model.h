// worker/model: model replicas and their data — the built-in MLP on the CPU
// (cpu_model.cc), the CUDA backend (cuda/) and TorchScript models (torch/),
// both opened as plugins (plugin_loader.h), Fashion-MNIST and tensor data,
// and the device factory.
//
// A model replica on a compute device, as the training loop sees it.
// Implementations: the CPU MLP (Mlp + OpenBLAS, cpu_model.cc) and the
// TorchScript model (torch/torch_model.cc), both HostModels (host_model.h),
// and the CUDA MLP (cuda/cuda_model.cc). Gradients are exposed per bucket so that a
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
#include "common/trace/trace.h"
#include "worker/model/eval_result.h"
#include "worker/model/mlp.h"

namespace gradsync {

// Threading: the training thread calls everything except WaitGradCopy, which
// the communication (copy) thread calls.
//
// Asynchrony: a GPU model enqueues work and returns; the host reads results
// only through TakeLoss, WaitGradCopy, GetParams and Evaluate. Ordering rules
// the model guarantees (so that the training loop never has to drain the
// device between steps):
//  - a gradient copy started by StartGradCopy(b, ...) reads bucket b of the
//    ForwardBackward that announced it, and the next ForwardBackward does not
//    overwrite bucket b's gradient before that copy has completed;
//  - SetParamsRange / ApplyGradient may read `host` after they return: the
//    caller keeps that memory unchanged until the device has reached work
//    enqueued after them — in the loop, until the next StartGradCopy into
//    the same memory completes (WaitGradCopy), which the model orders after
//    them;
//  - StageBatch may be called while the previous ForwardBackward still runs
//    on the device (double-buffered).
class DeviceModel {
 public:
  virtual ~DeviceModel() = default;

  virtual std::string name() const = 0;  // "cpu", "cuda:0 NVIDIA H100 ..."
  virtual size_t num_params() const = 0;
  virtual int num_layers() const = 0;
  virtual Range LayerRange(int l) const = 0;

  // Buckets (contiguous ranges, bucket 0 = last layers), the optimizer used
  // by ApplyGradient (one state per bucket), and the number of host gradient
  // slots the caller rotates through (copies into different slots may be in
  // flight at once).
  virtual absl::Status Configure(const std::vector<Range>& buckets,
                                 const OptimizerOptions& optimizer, int grad_slots) = 0;

  virtual absl::Status SetParams(const float* host) = 0;
  virtual absl::Status SetParamsRange(Range r, const float* host) = 0;
  virtual absl::Status GetParams(float* host) = 0;

  // Stages the next batch (on a GPU: copied while the current step computes).
  virtual absl::Status StageBatch(const float* x, const uint8_t* y, int batch) = 0;

  // Forward + backward on the staged batch, enqueued: `bucket_ready(b)` is
  // called once bucket b's gradient is computed or enqueued, b = 0, 1, ...
  // (a GPU returns before the work has run). The batch's mean loss is kept
  // for TakeLoss.
  virtual absl::Status ForwardBackward(
      int batch, const std::function<void(int bucket)>& bucket_ready) = 0;

  // The mean loss of the oldest ForwardBackward whose loss has not been
  // taken, waiting for it to be computed. At most 2 may be pending (the loop
  // reads a step's loss one step late); FAILED_PRECONDITION when none is.
  virtual absl::StatusOr<float> TakeLoss() = 0;

  // Training thread, from bucket_ready(b): starts copying bucket b's gradient
  // into host[0 .. bucket size) (a GPU enqueues it behind the backward work
  // that produces it; the CPU copies at once). `slot` in [0, grad_slots)
  // names the host slot, so that copies into different slots can be told
  // apart.
  virtual absl::Status StartGradCopy(int bucket, int slot, float* host) = 0;

  // Communication thread: blocks until the copy last started for (bucket,
  // slot) has completed.
  virtual absl::Status WaitGradCopy(int bucket, int slot) = 0;

  // Optimizer step of bucket b with the averaged gradient host[0..size).
  virtual absl::Status ApplyGradient(int bucket, const float* host) = 0;

  // Optimizer step of bucket b with the gradient the last ForwardBackward
  // produced, where it lies (a GPU: on the device, ordered after that
  // backward). For a job whose synchronisation is the identity
  // (GradientSync::identity(): one rank); the result equals
  // StartGradCopy + ApplyGradient of the same gradient, bit for bit.
  virtual absl::Status ApplyOwnGradient(int bucket) = 0;

  // Weight prediction (ring async with JobOptions::weight_prediction), on
  // the training thread around ForwardBackward. PredictParams(s) moves the
  // parameters w to w + s * (w - w_prev), w_prev being the parameters the
  // previous call found (w itself on the first call and after SetParams or
  // SetParamsRange): with one optimizer step between calls, s times the
  // last update. RestoreParams puts w back, bit for bit. FAILED_PRECONDITION
  // for a second PredictParams without RestoreParams, a RestoreParams
  // without one, and SetParams or SetParamsRange in between. The default (a
  // device that does not predict) is UNIMPLEMENTED.
  virtual absl::Status PredictParams(float steps_ahead);
  virtual absl::Status RestoreParams();

  virtual absl::StatusOr<EvalResult> Evaluate(const float* x, const uint8_t* y,
                                              int64_t n) = 0;

  // Checkpoints (ring jobs): the optimizer state of every bucket laid out as
  // the parameters, after the last ApplyGradient. Get fills `out` (vectors
  // resized to num_params() or emptied when the optimizer keeps no moment);
  // Set continues from `state` (the same optimizer and buckets):
  // INVALID_ARGUMENT (nothing changed) when its moments do not fit. Both
  // FAILED_PRECONDITION before Configure. The default (a device that does
  // not export its state) is UNIMPLEMENTED.
  virtual absl::Status GetOptimizerState(OptimizerState* out);
  virtual absl::Status SetOptimizerState(const OptimizerState& state);

  // Host memory suited to this device's copies (pinned on a GPU).
  virtual absl::StatusOr<std::shared_ptr<float>> AllocHost(size_t floats) = 0;

  // Timeline of the next ForwardBackward calls (forward, backward per layer,
  // on the training thread); null = off. `trace` must outlive its use: the
  // caller resets it to null before destroying it. The default records
  // nothing (a GPU's host-side enqueue times would say little).
  virtual void SetTrace(TraceRecorder* trace) { (void)trace; }
};

// Groups layers, last first, into contiguous layer-aligned buckets, as
// PyTorch DDP does with its small first bucket:
//  - bucket 0 (the last layers, ready first in backward) holds at most
//    min(kFirstBucketBytes, total / 4, bucket_bytes), so that even a small
//    model has a bucket to synchronise while the rest of backward runs;
//  - later buckets hold at most `bucket_bytes`;
//  - a layer larger than its bucket's limit gets a bucket of its own.
// The default model (784-256-128-10, 0.94 MB) gets [layers 2+1: 136 KB],
// [layer 0: 804 KB].
inline constexpr int64_t kFirstBucketBytes = 1 << 20;
std::vector<Range> MakeBuckets(const DeviceModel& model, int64_t bucket_bytes);

absl::StatusOr<std::unique_ptr<DeviceModel>> MakeCpuModel(const MlpSpec& spec);

// Records [since, now) as a "compute" span `name` (layer `layer`, or -1) in
// `trace` when it is set; returns now, the start of the next span (0 when
// not tracing). For models' ForwardBackward spans (SetTrace).
int64_t TraceComputeSince(TraceRecorder* trace, int64_t since, const char* name,
                          int layer);

// `floats` zeroed floats of plain host memory (at least one);
// RESOURCE_EXHAUSTED when the allocation fails. AllocHost of host models.
absl::StatusOr<std::shared_ptr<float>> AllocHostFloats(size_t floats);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_DEVICE_MODEL_H_
