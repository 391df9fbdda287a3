// Host side of the CUDA backend (cuda_backend.h): device management, the
// Status-returning wrappers of the kernels in cuda_backend.cu and
// CudaOptimizer (CudaMlp is in cuda_mlp_host.cc). Built by the host C++
// compiler against the CUDA runtime and cuBLAS C APIs.
#include "worker/model/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "worker/model/cuda/cuda_handles.h"
#include "worker/model/cuda/cuda_host_internal.h"
#include "worker/model/cuda/cuda_kernels.h"

namespace gradsync {
namespace cuda {
namespace {

using internal::AsStream;
using internal::CheckDevice;
using internal::CudaStatus;
using internal::UseDevice;

// Devices already switched to blocking synchronisation in this process.
ABSL_CONST_INIT absl::Mutex blocking_sync_mu(absl::kConstInit);
std::set<int>& BlockingSyncDevices() ABSL_EXCLUSIVE_LOCKS_REQUIRED(blocking_sync_mu) {
  static std::set<int>* devices = new std::set<int>();
  return *devices;
}

// Asks CUDA to block host threads that wait for `device` on an OS primitive
// (cudaDeviceScheduleBlockingSync) instead of spinning on a core, so that
// the training thread waiting in TakeLoss and the copy thread in
// WaitGradCopy leave the CPU to the reduction and gRPC threads.
//
// The flag belongs to the device's primary context and is meant to be set
// before that context exists:
//  1. cudaInitDevice (CUDA >= 12) creates the context with the flag, without
//     making the device current — the normal case, the first CUDA use of the
//     device in this process;
//  2. when the context exists already (another library, or a test, used the
//     device first), cudaSetDeviceFlags on the current device overwrites the
//     flags on CUDA >= 12; older runtimes answer
//     cudaErrorSetOnActiveProcess. That is not an error for us: the device
//     keeps its scheduling (spinning costs CPU time, not correctness), so we
//     clear the error and go on.
absl::Status EnableBlockingSync(int device) {
  cudaError_t e =
      cudaInitDevice(device, cudaDeviceScheduleBlockingSync, cudaInitDeviceFlagsAreValid);
  if (e == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  GS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  e = cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync);
  if (e == cudaErrorSetOnActiveProcess) {
    cudaGetLastError();  // see 2.: keep the context's flags
    return absl::OkStatus();
  }
  return CudaStatus(e, absl::StrCat("setting blocking synchronisation "
                                    "(cudaSetDeviceFlags) on device ",
                                    device));
}

}  // namespace

absl::Status internal::CheckDevice(int device) {
  const int count = DeviceCount();
  if (device < 0 || device >= count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA device ", device, " does not exist (", count, " CUDA device(s) found",
        count == 0 ? "; no GPU or no working CUDA driver" : "", ")"));
  }
  return absl::OkStatus();
}

absl::Status internal::UseDevice(int device) {
  {
    absl::MutexLock lock(&blocking_sync_mu);
    if (BlockingSyncDevices().count(device) == 0) {
      GS_RETURN_IF_ERROR(EnableBlockingSync(device));
      BlockingSyncDevices().insert(device);
    }
  }
  GS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Devices.

int DeviceCount() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the (non-sticky) error for later calls
    return 0;
  }
  return std::max(count, 0);
}

std::string DeviceName(int device) {
  if (device < 0 || device >= DeviceCount()) return "";
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return std::string(prop.name);
}

absl::Status SetDevice(int device) {
  GS_RETURN_IF_ERROR(CheckDevice(device));
  return UseDevice(device);
}

absl::Status StreamSynchronize(void* stream) {
  GS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(AsStream(stream)));
  return absl::OkStatus();
}

void DeviceDeleter::operator()(void* p) const {
  if (p != nullptr) cudaFree(p);
}

// ---------------------------------------------------------------------------
// PinnedBuffer.

absl::StatusOr<PinnedBuffer> PinnedBuffer::Allocate(size_t floats) {
  PinnedBuffer b;
  if (floats == 0) return b;
  void* p = nullptr;
  GS_CUDA_RETURN_IF_ERROR(cudaMallocHost(&p, floats * sizeof(float)));
  b.data_ = static_cast<float*>(p);
  b.size_ = floats;
  return b;
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

// ---------------------------------------------------------------------------
// Kernel wrappers.

absl::Status AddInto(float* dst_dev, const float* src_dev, size_t n, void* stream) {
  GS_CUDA_RETURN_IF_ERROR(internal::LaunchAddInto(dst_dev, src_dev, n, AsStream(stream)));
  return absl::OkStatus();
}

absl::Status Scale(float* x_dev, float a, size_t n, void* stream) {
  GS_CUDA_RETURN_IF_ERROR(internal::LaunchScale(x_dev, a, n, AsStream(stream)));
  return absl::OkStatus();
}

absl::Status BiasActivation(float* z_dev, const float* b_dev, int rows, int cols,
                            bool relu, void* stream) {
  if (rows < 0 || cols < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("BiasActivation: bad shape ", rows, "x", cols));
  }
  GS_CUDA_RETURN_IF_ERROR(
      internal::LaunchBiasActivation(z_dev, b_dev, rows, cols, relu, AsStream(stream)));
  return absl::OkStatus();
}

absl::Status SoftmaxCrossEntropy(const float* logits_dev, const uint8_t* y_dev, int rows,
                                 int classes, float inv_batch, float* dlogits_dev,
                                 double* row_loss_dev, int32_t* row_pred_dev,
                                 void* stream) {
  if (rows < 0 || classes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("SoftmaxCrossEntropy: bad shape ", rows, "x", classes));
  }
  GS_CUDA_RETURN_IF_ERROR(internal::LaunchSoftmaxCrossEntropy(
      logits_dev, y_dev, rows, classes, inv_batch, dlogits_dev, row_loss_dev,
      row_pred_dev, AsStream(stream)));
  return absl::OkStatus();
}

size_t BiasGradientScratchFloats(int rows, int cols) {
  return internal::BiasGradientScratchFloats(rows, cols);
}

absl::Status BiasGradient(const float* dz_dev, int rows, int cols, float* gb_dev,
                          float* scratch_dev, void* stream) {
  if (rows < 0 || cols < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("BiasGradient: bad shape ", rows, "x", cols));
  }
  if (scratch_dev == nullptr && BiasGradientScratchFloats(rows, cols) > 0) {
    return absl::InvalidArgumentError(absl::StrCat("BiasGradient: ", rows, " rows need ",
                                                   BiasGradientScratchFloats(rows, cols),
                                                   " floats of scratch"));
  }
  GS_CUDA_RETURN_IF_ERROR(internal::LaunchBiasGradient(dz_dev, rows, cols, gb_dev,
                                                       scratch_dev, AsStream(stream)));
  return absl::OkStatus();
}

absl::Status ReluBackward(float* da_dev, const float* a_dev, size_t n, void* stream) {
  GS_CUDA_RETURN_IF_ERROR(
      internal::LaunchReluBackward(da_dev, a_dev, n, AsStream(stream)));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// CudaOptimizer.

absl::StatusOr<CudaOptimizer> CudaOptimizer::Create(const OptimizerOptions& options,
                                                    size_t n, void* stream) {
  // Same validation as the CPU optimizer (its n = 0 allocates nothing).
  absl::StatusOr<Optimizer> cpu = Optimizer::Create(options, 0);
  if (!cpu.ok()) return cpu.status();
  CudaOptimizer opt(options, n);
  const bool adam = options.kind == OptimizerKind::kAdam;
  const size_t bytes = n * sizeof(float);
  // As on the CPU, plain SGD (momentum 0) keeps no state. The state is
  // zeroed on the stream that will use it: a cudaMemset on the legacy stream
  // would not be ordered before work on a non-blocking stream.
  if (n > 0 && (adam || options.momentum != 0.0f)) {
    void* p = nullptr;
    GS_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
    opt.m_.reset(static_cast<float*>(p));
    GS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(opt.m_.get(), 0, bytes, AsStream(stream)));
  }
  if (n > 0 && adam) {
    void* p = nullptr;
    GS_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
    opt.v_.reset(static_cast<float*>(p));
    GS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(opt.v_.get(), 0, bytes, AsStream(stream)));
  }
  return opt;
}

CudaOptimizer::CudaOptimizer(const OptimizerOptions& options, size_t n)
    : options_(options), n_(n) {}

absl::Status CudaOptimizer::Apply(float* params_dev, const float* grad_dev,
                                  void* stream) {
  BeginStep();
  return Apply(params_dev, grad_dev, 0, n_, stream);
}

absl::Status CudaOptimizer::Apply(float* params_dev, const float* grad_dev, size_t offset,
                                  size_t count, void* stream) {
  if (t_ < 1) {
    return absl::FailedPreconditionError(
        "CudaOptimizer: call BeginStep() before applying a sub-range");
  }
  if (offset > n_ || count > n_ - offset) {
    return absl::OutOfRangeError(absl::StrCat("CudaOptimizer: range [", offset, ", +",
                                              count, ") exceeds the optimizer size ",
                                              n_));
  }
  if (count == 0) return absl::OkStatus();
  float* p = params_dev + offset;
  const float* g = grad_dev + offset;
  const cudaStream_t s = AsStream(stream);
  const float lr = options_.lr;
  if (options_.kind == OptimizerKind::kSgd) {
    float* v = m_ ? m_.get() + offset : nullptr;
    GS_CUDA_RETURN_IF_ERROR(
        internal::LaunchSgd(p, g, v, count, lr, options_.momentum, s));
    return absl::OkStatus();
  }
  // Adam; bias corrections exactly as common/optimizer.cc computes them.
  const float b1 = options_.beta1;
  const float b2 = options_.beta2;
  const double t = static_cast<double>(t_);
  const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(b1, t)));
  const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(b2, t)));
  GS_CUDA_RETURN_IF_ERROR(internal::LaunchAdam(p, g, m_.get() + offset, v_.get() + offset,
                                               count, lr, b1, 1.0f - b1, b2, 1.0f - b2,
                                               options_.eps, c1, c2, s));
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace gradsync
