// CUDA backend: the MLP of worker/model/mlp.h, the optimizers of
// common/optimizer.h and the reduction kernels of common/kernels.h on one GPU.
//
// This is a plain C++ header: it includes no CUDA header, so .cc files built
// by the host compiler alone can use it. CUDA objects cross it as opaque
// pointers: a stream is a `void*` holding a cudaStream_t (nullptr = the legacy
// default stream), device buffers are `float*` device pointers.
//
// Errors: every CUDA / cuBLAS failure is returned as an INTERNAL status naming
// what was being done (the failed call) and the error's name and text
// (cudaGetErrorName + cudaGetErrorString); nothing here aborts. Errors of
// asynchronous work may surface at a later call (that is how CUDA reports
// them).
//
// Devices: calls that take a device pointer or stream and no device id run on
// the calling thread's current device (see SetDevice); the pointers and the
// stream must belong to it. CudaMlp methods make their own device current and
// leave it current on the calling thread.
#ifndef GRADSYNC_WORKER_MODEL_CUDA_CUDA_BACKEND_H_
#define GRADSYNC_WORKER_MODEL_CUDA_CUDA_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/optimizer.h"
#include "common/partition.h"
#include "worker/model/mlp.h"

namespace gradsync {
namespace cuda {

// Number of usable CUDA devices; 0 when there is no driver, no GPU or any
// other cudaGetDeviceCount error (never crashes, never aborts).
int DeviceCount();

// The device's name, e.g. "NVIDIA H100 80GB HBM3"; "" for a device that does
// not exist or cannot be queried.
std::string DeviceName(int device);

// Makes `device` current on the calling thread; the first use of a device in
// the process switches it to blocking synchronisation (see CudaMlp::Create).
// FAILED_PRECONDITION when it does not exist.
absl::Status SetDevice(int device);

// Blocks until all work enqueued on `stream` has finished.
absl::Status StreamSynchronize(void* stream);

// Frees device memory with cudaFree (errors ignored: used in destructors).
struct DeviceDeleter {
  void operator()(void* p) const;
};

// Page-locked ("pinned") host memory of `size()` floats, for callers outside
// the backend (inside, cuda_handles.h has the wrappers), so that
// cudaMemcpyAsync from / to it is truly asynchronous. Move-only; freed with
// cudaFreeHost. The contents are uninitialised.
class PinnedBuffer {
 public:
  // INTERNAL when cudaMallocHost fails (e.g. no driver). Allocate(0) gives an
  // empty buffer with data() == nullptr and touches no CUDA API.
  static absl::StatusOr<PinnedBuffer> Allocate(size_t floats);

  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  float* data_ = nullptr;
  size_t size_ = 0;
};

// ---------------------------------------------------------------------------
// Element-wise kernels on flat device buffers, enqueued on `stream` (they
// return once enqueued). Each element is rounded exactly as the CPU versions
// in common/kernels.h (no fused multiply-add), so results are bit-identical
// (tests compare them with memcmp). n == 0 is a no-op.

// dst[i] += src[i] for i in [0, n).
absl::Status AddInto(float* dst_dev, const float* src_dev, size_t n, void* stream);

// x[i] *= a for i in [0, n).
absl::Status Scale(float* x_dev, float a, size_t n, void* stream);

// ---------------------------------------------------------------------------
// The building blocks of CudaMlp, exposed for tests and for callers that
// assemble their own models. All enqueue on `stream` and return once
// enqueued. Matrices are row-major [rows][cols].

// z[r][j] += b[j]; then, when relu, z[r][j] = max(z[r][j], 0) (as
// std::max(v, 0.0f): -0.0 and NaN pass through). Bit-identical to the CPU.
absl::Status BiasActivation(float* z_dev, const float* b_dev, int rows, int cols,
                            bool relu, void* stream);

// Softmax cross-entropy of logits[rows][classes] with labels y[rows],
// numerically stable (max-shifted, log-sum-exp in double) and computed as
// worker/mlp.cc does:
//   row_loss[r] = lse_r - (z[r][y_r] - max_r)                (double)
//   dlogits[r][j] = softmax(z_r)_j * inv_batch - [j == y_r] * inv_batch
// A label >= classes contributes loss 0 and no one-hot term (mlp.cc does the
// same). dlogits_dev may be nullptr (no gradient); row_pred_dev may be
// nullptr, otherwise it gets the first argmax of each row. The mean loss is
// sum(row_loss) / rows, summed by the caller (CudaMlp sums in row order on
// the host, like the CPU). rows >= 0, classes >= 1. Not bit-identical to the
// CPU: the device's exp/log (double) may differ from glibc's in the last
// bit, and the row's sum of exponentials is added in a tree; tests allow a
// relative error of 1e-5.
absl::Status SoftmaxCrossEntropy(const float* logits_dev, const uint8_t* y_dev, int rows,
                                 int classes, float inv_batch, float* dlogits_dev,
                                 double* row_loss_dev, int32_t* row_pred_dev,
                                 void* stream);

// gb[j] = sum_r dz[r][j] in float, overwriting gb[0..cols), in two passes
// over tiles of rows (see cuda_kernels.h for the order). Deterministic: the
// order of additions depends only on (rows, cols), so results are bitwise the
// same from run to run and on every GPU. NOT bit-identical to worker/mlp.cc,
// which adds rows one by one: both are within the usual summation error
// bound (rows * 2^-24 * sum_r |dz[r][j]|), and identical whenever every
// partial sum is exact. `scratch_dev` holds BiasGradientScratchFloats(rows,
// cols) floats (nullptr when that is 0, i.e. rows <= 1024).
size_t BiasGradientScratchFloats(int rows, int cols);
absl::Status BiasGradient(const float* dz_dev, int rows, int cols, float* gb_dev,
                          float* scratch_dev, void* stream);

// da[i] = 0 where a[i] <= 0 (ReLU backward through a = relu(z)).
// Bit-identical to the CPU.
absl::Status ReluBackward(float* da_dev, const float* a_dev, size_t n, void* stream);

// ---------------------------------------------------------------------------
// Optimizer with the math of common/optimizer.cc (bit-identical per element:
// same operation order, IEEE rounding, no FMA contraction), on flat device
// buffers. The state (sgd momentum; adam first and second moments) lives on
// the device that was current at Create. Movable, not copyable, not
// thread-safe.
//
// Step counting (matters for Adam's bias correction, ignored by SGD): one
// optimizer step is BeginStep() followed by any number of sub-range Apply
// calls over disjoint ranges, typically one per gradient bucket; every range
// applied in that step uses the same step number t = steps(). The
// whole-buffer Apply(params, grad, stream) is BeginStep() + Apply over
// [0, n). Applying a range twice in one step applies two updates with the
// same t (the CPU optimizer has no equivalent; callers should not).
class CudaOptimizer {
 public:
  // INVALID_ARGUMENT for options the CPU Optimizer::Create rejects (checked
  // before any CUDA call); INTERNAL when the state cannot be allocated. The
  // state is zeroed by cudaMemsetAsync on `stream`, the stream the caller
  // then applies on (work on any other stream must be ordered after it).
  // n == 0 or plain SGD (momentum 0) allocate nothing.
  static absl::StatusOr<CudaOptimizer> Create(const OptimizerOptions& options, size_t n,
                                              void* stream);

  CudaOptimizer(CudaOptimizer&&) noexcept = default;
  CudaOptimizer& operator=(CudaOptimizer&&) noexcept = default;
  CudaOptimizer(const CudaOptimizer&) = delete;
  CudaOptimizer& operator=(const CudaOptimizer&) = delete;

  // Starts a new step: steps() += 1.
  void BeginStep() { ++t_; }

  // One full step: BeginStep(), then update params[0..n) with grad[0..n).
  absl::Status Apply(float* params_dev, const float* grad_dev, void* stream);

  // Updates params[offset, offset+count) with grad[offset, offset+count) and
  // the matching state, using step number steps(). params_dev and grad_dev
  // point at element 0 of the FULL flat buffers (not at the sub-range).
  // FAILED_PRECONDITION before the first BeginStep(); OUT_OF_RANGE when
  // offset + count > size(). count == 0 is a no-op. Ranges applied
  // concurrently on different streams must be disjoint.
  absl::Status Apply(float* params_dev, const float* grad_dev, size_t offset,
                     size_t count, void* stream);

  size_t size() const { return n_; }
  int64_t steps() const { return t_; }
  const OptimizerOptions& options() const { return options_; }

 private:
  CudaOptimizer(const OptimizerOptions& options, size_t n);

  OptimizerOptions options_;
  size_t n_ = 0;
  int64_t t_ = 0;
  std::unique_ptr<float, DeviceDeleter> m_;  // sgd momentum / adam 1st moment
  std::unique_ptr<float, DeviceDeleter> v_;  // adam 2nd moment
};

// ---------------------------------------------------------------------------
// The MLP of worker/model/mlp.h on one GPU: same flat parameter layout (layer
// l: W_l [out][in] row-major, then b_l [out]), ReLU hidden layers, softmax
// cross-entropy, gradient of the mean loss over the batch.
//
// Streams: all math runs on compute_stream() (cuBLAS sgemm + custom
// kernels); input batches are copied on a separate staging stream into one
// of two device buffers, so staging batch t+1 overlaps the compute of batch
// t. The host waits for the device only in TakeLoss, Evaluate, the
// synchronous Upload/Download calls, and (briefly) in StageBatch.
//
// Not thread-safe; one per trainer, used from one thread at a time. Work
// that the caller enqueues on other streams and that touches params() or
// grad() must be ordered against the compute stream by the caller (e.g. with
// cudaStreamWaitEvent) — in particular grad() is overwritten by the next
// ForwardBackward (BackwardHooks::before_layer_grad is the place to order
// it). Not copyable.
class CudaMlp {
 public:
  // Losses of ForwardBackward calls not yet taken (TakeLoss) at most.
  static constexpr int kMaxPendingLosses = 2;
  // Rows per evaluation block (pinned staging, one forward pass each).
  static constexpr int64_t kEvalBlockRows = 8192;

  // Allocates everything for batches of up to max_batch rows on `device`
  // and makes it current. The first model on a device switches the device to
  // blocking synchronisation (cudaDeviceScheduleBlockingSync: a waiting host
  // thread sleeps instead of spinning). FAILED_PRECONDITION (naming the
  // device and the device count) when the device does not exist,
  // INVALID_ARGUMENT for a spec with fewer than 2 widths or a width < 1, or
  // max_batch < 1; INTERNAL for CUDA / cuBLAS failures. TF32 tensor-core
  // math is used in the GEMMs only when allow_tf32 (faster, ~1e-3 relative
  // error); otherwise full FP32. Parameters and gradient start zeroed.
  static absl::StatusOr<std::unique_ptr<CudaMlp>> Create(const MlpSpec& spec, int device,
                                                         bool allow_tf32, int max_batch);
  // Waits for the device's work on this model's streams, then frees.
  ~CudaMlp();
  CudaMlp(const CudaMlp&) = delete;
  CudaMlp& operator=(const CudaMlp&) = delete;

  const MlpSpec& spec() const;
  int device() const;
  int max_batch() const;
  size_t num_params() const;
  int num_layers() const;
  // Range of layer l's parameters (W_l then b_l); same as Mlp::LayerRange.
  Range LayerRange(int l) const;

  // Flat device buffers of num_params() floats.
  float* params();
  float* grad();

  // Synchronous copies between host memory (any kind) and params() /
  // grad(), ordered on the compute stream after all work enqueued there; the
  // host buffer holds num_params() floats.
  absl::Status UploadParams(const float* host);
  absl::Status DownloadParams(float* host);
  absl::Status DownloadGrad(float* host);

  // Copies x[batch][in] and y[batch] into pinned host staging memory (so the
  // caller's buffers may be reused at once) and enqueues their copy to the
  // next of two device buffers on the staging stream; the next
  // ForwardBackward reads that buffer. May be called while the previous
  // ForwardBackward still runs on the device:
  //  1. the pinned slot is the one of two stagings ago; the host waits
  //     (event) until that staging's copy has left it (in the training loop
  //     that copy has long been able to run: the host only waits for a
  //     transfer, never for a step in progress);
  //  2. the device slot is the one the ForwardBackward before last read;
  //     the staging stream waits (on the GPU, not the host) for that
  //     ForwardBackward to finish before overwriting it.
  // INVALID_ARGUMENT unless 1 <= batch <= max_batch.
  absl::Status StageBatch(const float* x_host, const uint8_t* y_host, int batch);

  // Called on the calling thread during ForwardBackward, in the backward
  // order l = L-1 down to 0. A hook returning an error stops enqueueing;
  // ForwardBackward returns that error.
  struct BackwardHooks {
    // Before any work that writes layer l's gradient (W_l and b_l) is
    // enqueued: e.g. make compute_stream() wait (cudaStreamWaitEvent) until
    // a copy of the previous gradient has been read.
    std::function<absl::Status(int layer)> before_layer_grad;
    // After layer l's gradient has been enqueued on compute_stream(): e.g.
    // record an event there and start copying the layer. Must not enqueue
    // work on compute_stream() that modifies params() or grad().
    std::function<absl::Status(int layer)> after_layer_grad;
  };

  // Enqueues forward + backward of the most recently staged batch on the
  // compute stream (which first waits, on the GPU, for that batch's copy)
  // and returns without waiting for the device. `batch` must equal the
  // staged batch size (INVALID_ARGUMENT otherwise, FAILED_PRECONDITION when
  // nothing was staged); the same staged batch may be used repeatedly.
  // FAILED_PRECONDITION when kMaxPendingLosses losses have not been taken.
  //
  // Writes d(mean loss)/d(params) to grad() (overwritten, not accumulated).
  // The batch's per-row losses are copied to a pinned slot of a two-slot
  // ring behind the forward pass, with an event; TakeLoss reads them.
  absl::Status ForwardBackward(int batch, const BackwardHooks& hooks = {});

  // The mean loss of the oldest ForwardBackward not yet taken: waits for
  // that step's forward pass only (event), then sums its row losses in row
  // order in double, as the CPU does. FAILED_PRECONDITION when none is
  // pending.
  absl::StatusOr<float> TakeLoss();
  int pending_losses() const;

  // The cudaStream_t of the compute stream.
  void* compute_stream();

  // (mean loss, number of correct first-argmax predictions) over n samples
  // x[n][in], y[n] with the current params(), ordered after all work on the
  // compute stream; synchronous. The samples go through pinned staging
  // buffers in blocks of up to kEvalBlockRows rows, double-buffered: the
  // host fills block i+1 while the device computes block i. The block
  // buffers (activations for kEvalBlockRows rows) are allocated on first
  // use. Labels >= classes count in n but add no loss and are never correct
  // (as Mlp::Evaluate). n <= 0 gives (0, 0). Does not disturb the staged
  // training batch or the pending losses.
  absl::StatusOr<std::pair<double, int64_t>> Evaluate(const float* x_host,
                                                      const uint8_t* y_host, int64_t n);

 private:
  struct State;
  explicit CudaMlp(std::unique_ptr<State> state);
  // Allocates the per-batch device and pinned buffers of `s` (for
  // s->max_batch rows) and zeroes parameters and gradient.
  static absl::Status AllocateBuffers(State* s);
  // Enqueues the forward pass of `rows` rows of x_dev; layer l's output goes
  // to acts[l + 1] (logits in acts[L]).
  absl::Status Forward(const float* x_dev, int rows, const std::vector<float*>& acts);
  absl::Status Backward(const float* x_dev, int batch, const BackwardHooks& hooks);
  absl::Status EnsureEvalBuffers(int64_t rows);

  std::unique_ptr<State> s_;
};

}  // namespace cuda
}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_CUDA_CUDA_BACKEND_H_
