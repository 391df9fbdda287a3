// Host side of the CUDA backend (cuda_backend.h): device management, the
// Status-returning wrappers of the kernels in cuda_backend.cu, CudaOptimizer
// and CudaMlp. Built by the host C++ compiler against the CUDA runtime and
// cuBLAS C APIs.
#include "worker/model/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/model/cuda/cuda_kernels.h"

namespace gradsync {
namespace cuda {
namespace {

absl::Status CudaError(cudaError_t e, const char* what) {
  return absl::InternalError(absl::StrCat("CUDA error in ", what, ": ",
                                          cudaGetErrorName(e), " (",
                                          cudaGetErrorString(e), ")"));
}

absl::Status CublasError(cublasStatus_t s, const char* what) {
  return absl::InternalError(absl::StrCat("cuBLAS error in ", what, ": ",
                                          cublasGetStatusName(s), " (",
                                          cublasGetStatusString(s), ")"));
}

#define GS_CUDA_RETURN_IF_ERROR(expr)                             \
  do {                                                           \
    const cudaError_t gs_cuda_err_ = (expr);                     \
    if (gs_cuda_err_ != cudaSuccess) {                           \
      return ::gradsync::cuda::CudaError(gs_cuda_err_, #expr);   \
    }                                                            \
  } while (0)

#define GS_CUBLAS_RETURN_IF_ERROR(expr)                                  \
  do {                                                                   \
    const cublasStatus_t gs_cublas_st_ = (expr);                         \
    if (gs_cublas_st_ != CUBLAS_STATUS_SUCCESS) {                        \
      return ::gradsync::cuda::CublasError(gs_cublas_st_, #expr);        \
    }                                                                    \
  } while (0)

#define GS_RETURN_IF_ERROR(expr)                   \
  do {                                             \
    absl::Status gs_status_ = (expr);              \
    if (!gs_status_.ok()) return gs_status_;       \
  } while (0)

cudaStream_t AsStream(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

absl::Status CheckDevice(int device) {
  const int count = DeviceCount();
  if (device < 0 || device >= count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA device ", device, " does not exist (", count,
        " CUDA device(s) found",
        count == 0 ? "; no GPU or no working CUDA driver" : "", ")"));
  }
  return absl::OkStatus();
}

// Device allocation of `bytes` into a unique_ptr; nullptr for 0 bytes.
template <typename T>
absl::Status DeviceAlloc(size_t count, std::unique_ptr<T, DeviceDeleter>* out) {
  out->reset();
  if (count == 0) return absl::OkStatus();
  void* p = nullptr;
  GS_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, count * sizeof(T)));
  out->reset(static_cast<T*>(p));
  return absl::OkStatus();
}

struct PinnedDeleter {
  void operator()(void* p) const {
    if (p != nullptr) cudaFreeHost(p);
  }
};

template <typename T>
absl::Status PinnedAlloc(size_t count, std::unique_ptr<T, PinnedDeleter>* out) {
  out->reset();
  if (count == 0) return absl::OkStatus();
  void* p = nullptr;
  GS_CUDA_RETURN_IF_ERROR(cudaMallocHost(&p, count * sizeof(T)));
  out->reset(static_cast<T*>(p));
  return absl::OkStatus();
}

}  // namespace

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
  GS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  return absl::OkStatus();
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
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

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

absl::Status AddInto(float* dst_dev, const float* src_dev, size_t n,
                     void* stream) {
  GS_CUDA_RETURN_IF_ERROR(
      internal::LaunchAddInto(dst_dev, src_dev, n, AsStream(stream)));
  return absl::OkStatus();
}

absl::Status Scale(float* x_dev, float a, size_t n, void* stream) {
  GS_CUDA_RETURN_IF_ERROR(internal::LaunchScale(x_dev, a, n, AsStream(stream)));
  return absl::OkStatus();
}

absl::Status BiasActivation(float* z_dev, const float* b_dev, int rows,
                            int cols, bool relu, void* stream) {
  if (rows < 0 || cols < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("BiasActivation: bad shape ", rows, "x", cols));
  }
  GS_CUDA_RETURN_IF_ERROR(internal::LaunchBiasActivation(
      z_dev, b_dev, rows, cols, relu, AsStream(stream)));
  return absl::OkStatus();
}

absl::Status SoftmaxCrossEntropy(const float* logits_dev, const uint8_t* y_dev,
                                 int rows, int classes, float inv_batch,
                                 float* dlogits_dev, double* row_loss_dev,
                                 int32_t* row_pred_dev, void* stream) {
  if (rows < 0 || classes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("SoftmaxCrossEntropy: bad shape ", rows, "x", classes));
  }
  GS_CUDA_RETURN_IF_ERROR(internal::LaunchSoftmaxCrossEntropy(
      logits_dev, y_dev, rows, classes, inv_batch, dlogits_dev, row_loss_dev,
      row_pred_dev, AsStream(stream)));
  return absl::OkStatus();
}

absl::Status BiasGradient(const float* dz_dev, int rows, int cols,
                          float* gb_dev, void* stream) {
  if (rows < 0 || cols < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("BiasGradient: bad shape ", rows, "x", cols));
  }
  GS_CUDA_RETURN_IF_ERROR(internal::LaunchBiasGradient(dz_dev, rows, cols,
                                                       gb_dev, AsStream(stream)));
  return absl::OkStatus();
}

absl::Status ReluBackward(float* da_dev, const float* a_dev, size_t n,
                          void* stream) {
  GS_CUDA_RETURN_IF_ERROR(
      internal::LaunchReluBackward(da_dev, a_dev, n, AsStream(stream)));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// CudaOptimizer.

absl::StatusOr<CudaOptimizer> CudaOptimizer::Create(
    const OptimizerOptions& options, size_t n) {
  // Same validation as the CPU optimizer (its n = 0 allocates nothing).
  absl::StatusOr<Optimizer> cpu = Optimizer::Create(options, 0);
  if (!cpu.ok()) return cpu.status();
  CudaOptimizer opt(options, n);
  const bool adam = options.kind == OptimizerKind::kAdam;
  // As on the CPU, plain SGD (momentum 0) keeps no state.
  if (adam || options.momentum != 0.0f) {
    GS_RETURN_IF_ERROR(DeviceAlloc(n, &opt.m_));
    if (n > 0) {
      GS_CUDA_RETURN_IF_ERROR(cudaMemset(opt.m_.get(), 0, n * sizeof(float)));
    }
  }
  if (adam) {
    GS_RETURN_IF_ERROR(DeviceAlloc(n, &opt.v_));
    if (n > 0) {
      GS_CUDA_RETURN_IF_ERROR(cudaMemset(opt.v_.get(), 0, n * sizeof(float)));
    }
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

absl::Status CudaOptimizer::Apply(float* params_dev, const float* grad_dev,
                                  size_t offset, size_t count, void* stream) {
  if (t_ < 1) {
    return absl::FailedPreconditionError(
        "CudaOptimizer: call BeginStep() before applying a sub-range");
  }
  if (offset > n_ || count > n_ - offset) {
    return absl::OutOfRangeError(
        absl::StrCat("CudaOptimizer: range [", offset, ", +", count,
                     ") exceeds the optimizer size ", n_));
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
  GS_CUDA_RETURN_IF_ERROR(internal::LaunchAdam(
      p, g, m_.get() + offset, v_.get() + offset, count, lr, b1, 1.0f - b1,
      b2, 1.0f - b2, options_.eps, c1, c2, s));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// CudaMlp.

struct CudaMlp::State {
  MlpSpec spec;
  int device = 0;
  bool allow_tf32 = false;
  int max_batch = 0;
  size_t num_params = 0;
  std::vector<size_t> w_offset;
  std::vector<size_t> b_offset;

  cudaStream_t compute = nullptr;
  cudaStream_t copy = nullptr;
  cublasHandle_t blas = nullptr;
  cudaEvent_t copy_done[2] = {nullptr, nullptr};     // staging copy finished
  cudaEvent_t compute_done[2] = {nullptr, nullptr};  // last reader finished
  cudaEvent_t loss_ready = nullptr;

  std::unique_ptr<float, DeviceDeleter> params, grad;
  // acts[l], l = 1..L: layer outputs [max_batch][widths[l]] (post-ReLU for
  // hidden layers, logits for l = L). acts[0] is unused: the input is read
  // straight from the staging buffer.
  std::vector<std::unique_ptr<float, DeviceDeleter>> acts;
  // deltas[l], l = 1..L: d(mean loss)/d(z_l), same shapes as acts[l].
  std::vector<std::unique_ptr<float, DeviceDeleter>> deltas;

  // Double-buffered training input.
  std::unique_ptr<float, PinnedDeleter> x_pin[2];
  std::unique_ptr<uint8_t, PinnedDeleter> y_pin[2];
  std::unique_ptr<float, DeviceDeleter> x_dev[2];
  std::unique_ptr<uint8_t, DeviceDeleter> y_dev[2];
  int staged = -1;  // slot of the most recent StageBatch, -1 = none
  int staged_rows[2] = {0, 0};

  // Per-row loss / prediction of the last softmax.
  std::unique_ptr<double, DeviceDeleter> row_loss_dev;
  std::unique_ptr<int32_t, DeviceDeleter> row_pred_dev;
  std::unique_ptr<double, PinnedDeleter> row_loss_host;
  std::unique_ptr<int32_t, PinnedDeleter> row_pred_host;

  // Evaluation input (separate from the training slots), made on first use.
  std::unique_ptr<float, DeviceDeleter> eval_x;
  std::unique_ptr<uint8_t, DeviceDeleter> eval_y;

  ~State() {
    // Best effort, errors ignored: finish in-flight work before the buffers
    // (members, destroyed after this body) are freed.
    cudaSetDevice(device);
    if (compute != nullptr) cudaStreamSynchronize(compute);
    if (copy != nullptr) cudaStreamSynchronize(copy);
    if (blas != nullptr) cublasDestroy(blas);
    for (cudaEvent_t e : {copy_done[0], copy_done[1], compute_done[0],
                          compute_done[1], loss_ready}) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    if (compute != nullptr) cudaStreamDestroy(compute);
    if (copy != nullptr) cudaStreamDestroy(copy);
  }
};

absl::StatusOr<std::unique_ptr<CudaMlp>> CudaMlp::Create(const MlpSpec& spec,
                                                         int device,
                                                         bool allow_tf32,
                                                         int max_batch) {
  if (spec.widths.size() < 2) {
    return absl::InvalidArgumentError(
        "CudaMlp: the spec needs at least an input and an output width");
  }
  for (int w : spec.widths) {
    if (w < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("CudaMlp: width ", w, " in ", spec.ToString(), " < 1"));
    }
  }
  if (max_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaMlp: max_batch must be >= 1, got ", max_batch));
  }
  GS_RETURN_IF_ERROR(CheckDevice(device));
  GS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));

  auto s = std::make_unique<State>();
  s->spec = spec;
  s->device = device;
  s->allow_tf32 = allow_tf32;
  s->max_batch = max_batch;
  const int layers = static_cast<int>(spec.widths.size()) - 1;
  for (int l = 0; l < layers; ++l) {
    const size_t in = static_cast<size_t>(spec.widths[l]);
    const size_t out = static_cast<size_t>(spec.widths[l + 1]);
    s->w_offset.push_back(s->num_params);
    s->b_offset.push_back(s->num_params + out * in);
    s->num_params += out * in + out;
  }

  GS_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&s->compute, cudaStreamNonBlocking));
  GS_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&s->copy, cudaStreamNonBlocking));
  for (int i = 0; i < 2; ++i) {
    GS_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&s->copy_done[i],
                                                     cudaEventDisableTiming));
    GS_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&s->compute_done[i],
                                                     cudaEventDisableTiming));
  }
  GS_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&s->loss_ready, cudaEventDisableTiming));
  GS_CUBLAS_RETURN_IF_ERROR(cublasCreate(&s->blas));
  GS_CUBLAS_RETURN_IF_ERROR(cublasSetStream(s->blas, s->compute));
  GS_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(
      s->blas, allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  GS_CUBLAS_RETURN_IF_ERROR(
      cublasSetPointerMode(s->blas, CUBLAS_POINTER_MODE_HOST));

  GS_RETURN_IF_ERROR(DeviceAlloc(s->num_params, &s->params));
  GS_RETURN_IF_ERROR(DeviceAlloc(s->num_params, &s->grad));
  GS_CUDA_RETURN_IF_ERROR(
      cudaMemset(s->params.get(), 0, s->num_params * sizeof(float)));
  GS_CUDA_RETURN_IF_ERROR(
      cudaMemset(s->grad.get(), 0, s->num_params * sizeof(float)));
  const size_t rows = static_cast<size_t>(max_batch);
  s->acts.resize(layers + 1);
  s->deltas.resize(layers + 1);
  for (int l = 1; l <= layers; ++l) {
    const size_t count = rows * static_cast<size_t>(spec.widths[l]);
    GS_RETURN_IF_ERROR(DeviceAlloc(count, &s->acts[l]));
    GS_RETURN_IF_ERROR(DeviceAlloc(count, &s->deltas[l]));
  }
  const size_t x_count = rows * static_cast<size_t>(spec.widths[0]);
  for (int i = 0; i < 2; ++i) {
    GS_RETURN_IF_ERROR(PinnedAlloc(x_count, &s->x_pin[i]));
    GS_RETURN_IF_ERROR(PinnedAlloc(rows, &s->y_pin[i]));
    GS_RETURN_IF_ERROR(DeviceAlloc(x_count, &s->x_dev[i]));
    GS_RETURN_IF_ERROR(DeviceAlloc(rows, &s->y_dev[i]));
  }
  GS_RETURN_IF_ERROR(DeviceAlloc(rows, &s->row_loss_dev));
  GS_RETURN_IF_ERROR(DeviceAlloc(rows, &s->row_pred_dev));
  GS_RETURN_IF_ERROR(PinnedAlloc(rows, &s->row_loss_host));
  GS_RETURN_IF_ERROR(PinnedAlloc(rows, &s->row_pred_host));
  GS_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return std::unique_ptr<CudaMlp>(new CudaMlp(std::move(s)));
}

CudaMlp::CudaMlp(std::unique_ptr<State> state) : s_(std::move(state)) {}

CudaMlp::~CudaMlp() = default;

const MlpSpec& CudaMlp::spec() const { return s_->spec; }
int CudaMlp::device() const { return s_->device; }
int CudaMlp::max_batch() const { return s_->max_batch; }
size_t CudaMlp::num_params() const { return s_->num_params; }
int CudaMlp::num_layers() const {
  return static_cast<int>(s_->spec.widths.size()) - 1;
}

Range CudaMlp::LayerRange(int l) const {
  const size_t in = static_cast<size_t>(s_->spec.widths[l]);
  const size_t out = static_cast<size_t>(s_->spec.widths[l + 1]);
  return Range{s_->w_offset[l], out * in + out};
}

float* CudaMlp::params() { return s_->params.get(); }
float* CudaMlp::grad() { return s_->grad.get(); }
void* CudaMlp::compute_stream() { return s_->compute; }

absl::Status CudaMlp::UploadParams(const float* host) {
  GS_CUDA_RETURN_IF_ERROR(cudaSetDevice(s_->device));
  GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s_->params.get(), host,
                                          s_->num_params * sizeof(float),
                                          cudaMemcpyHostToDevice, s_->compute));
  GS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s_->compute));
  return absl::OkStatus();
}

absl::Status CudaMlp::DownloadParams(float* host) {
  GS_CUDA_RETURN_IF_ERROR(cudaSetDevice(s_->device));
  GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, s_->params.get(),
                                          s_->num_params * sizeof(float),
                                          cudaMemcpyDeviceToHost, s_->compute));
  GS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s_->compute));
  return absl::OkStatus();
}

absl::Status CudaMlp::DownloadGrad(float* host) {
  GS_CUDA_RETURN_IF_ERROR(cudaSetDevice(s_->device));
  GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, s_->grad.get(),
                                          s_->num_params * sizeof(float),
                                          cudaMemcpyDeviceToHost, s_->compute));
  GS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s_->compute));
  return absl::OkStatus();
}

absl::Status CudaMlp::StageBatch(const float* x_host, const uint8_t* y_host,
                                 int batch) {
  if (batch < 1 || batch > s_->max_batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaMlp::StageBatch: batch ", batch,
                     " outside [1, max_batch=", s_->max_batch, "]"));
  }
  GS_CUDA_RETURN_IF_ERROR(cudaSetDevice(s_->device));
  const int slot = s_->staged < 0 ? 0 : 1 - s_->staged;
  // The pinned slot may still be the source of the copy enqueued two
  // stagings ago.
  GS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(s_->copy_done[slot]));
  const size_t x_count =
      static_cast<size_t>(batch) * static_cast<size_t>(s_->spec.widths[0]);
  std::memcpy(s_->x_pin[slot].get(), x_host, x_count * sizeof(float));
  std::memcpy(s_->y_pin[slot].get(), y_host, static_cast<size_t>(batch));
  // The device slot may still be read by the last ForwardBackward that used
  // it (a never-recorded event is complete, so the first wait is a no-op).
  GS_CUDA_RETURN_IF_ERROR(
      cudaStreamWaitEvent(s_->copy, s_->compute_done[slot], 0));
  GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      s_->x_dev[slot].get(), s_->x_pin[slot].get(), x_count * sizeof(float),
      cudaMemcpyHostToDevice, s_->copy));
  GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      s_->y_dev[slot].get(), s_->y_pin[slot].get(), static_cast<size_t>(batch),
      cudaMemcpyHostToDevice, s_->copy));
  GS_CUDA_RETURN_IF_ERROR(cudaEventRecord(s_->copy_done[slot], s_->copy));
  s_->staged = slot;
  s_->staged_rows[slot] = batch;
  return absl::OkStatus();
}

absl::Status CudaMlp::Forward(const float* x_dev, int rows) {
  State& s = *s_;
  const int layers = num_layers();
  const float one = 1.0f;
  const float zero = 0.0f;
  const float* a = x_dev;
  for (int l = 0; l < layers; ++l) {
    const int in = s.spec.widths[l];
    const int out = s.spec.widths[l + 1];
    float* z = s.acts[l + 1].get();
    // Row-major Z[rows][out] = A[rows][in] * W[out][in]^T. cuBLAS is
    // column-major, where these buffers read as Z^T (out x rows), A^T
    // (in x rows) and W^T (in x out): Z^T = (W^T)^T * A^T.
    GS_CUBLAS_RETURN_IF_ERROR(cublasSgemm(
        s.blas, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &one,
        s.params.get() + s.w_offset[l], in, a, in, &zero, z, out));
    GS_RETURN_IF_ERROR(BiasActivation(z, s.params.get() + s.b_offset[l], rows,
                                      out, /*relu=*/l + 1 < layers,
                                      s.compute));
    a = z;
  }
  return absl::OkStatus();
}

absl::StatusOr<float> CudaMlp::ForwardBackward(
    int batch, const std::function<void(int layer)>& on_layer_grad) {
  State& s = *s_;
  if (s.staged < 0) {
    return absl::FailedPreconditionError(
        "CudaMlp::ForwardBackward: no batch staged (call StageBatch first)");
  }
  const int slot = s.staged;
  if (batch != s.staged_rows[slot]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CudaMlp::ForwardBackward: batch ", batch,
        " differs from the staged batch of ", s.staged_rows[slot], " rows"));
  }
  GS_CUDA_RETURN_IF_ERROR(cudaSetDevice(s.device));
  GS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(s.compute, s.copy_done[slot], 0));
  const float* x = s.x_dev[slot].get();
  const int layers = num_layers();
  const int classes = s.spec.widths[layers];
  GS_RETURN_IF_ERROR(Forward(x, batch));

  const float inv_batch = 1.0f / static_cast<float>(batch);
  GS_RETURN_IF_ERROR(SoftmaxCrossEntropy(
      s.acts[layers].get(), s.y_dev[slot].get(), batch, classes, inv_batch,
      s.deltas[layers].get(), s.row_loss_dev.get(), nullptr, s.compute));
  GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      s.row_loss_host.get(), s.row_loss_dev.get(),
      static_cast<size_t>(batch) * sizeof(double), cudaMemcpyDeviceToHost,
      s.compute));
  GS_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.loss_ready, s.compute));

  const float one = 1.0f;
  const float zero = 0.0f;
  for (int l = layers - 1; l >= 0; --l) {
    const int in = s.spec.widths[l];
    const int out = s.spec.widths[l + 1];
    const float* dz = s.deltas[l + 1].get();
    const float* a = l == 0 ? x : s.acts[l].get();
    // Row-major dW[out][in] = dZ[batch][out]^T * A[batch][in]; column-major:
    // dW^T (in x out) = A^T (in x batch) * dZ (batch x out), with dZ read as
    // the transpose of the stored dZ^T (out x batch).
    GS_CUBLAS_RETURN_IF_ERROR(cublasSgemm(
        s.blas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, batch, &one, a, in, dz, out,
        &zero, s.grad.get() + s.w_offset[l], in));
    GS_RETURN_IF_ERROR(BiasGradient(dz, batch, out,
                                    s.grad.get() + s.b_offset[l], s.compute));
    if (on_layer_grad) on_layer_grad(l);
    if (l == 0) break;  // no gradient w.r.t. the input
    // Row-major dA[batch][in] = dZ[batch][out] * W[out][in]; column-major:
    // dA^T (in x batch) = W^T (in x out) * dZ^T (out x batch).
    float* da = s.deltas[l].get();
    GS_CUBLAS_RETURN_IF_ERROR(cublasSgemm(
        s.blas, CUBLAS_OP_N, CUBLAS_OP_N, in, batch, out, &one,
        s.params.get() + s.w_offset[l], in, dz, out, &zero, da, in));
    // a = relu(z) > 0 exactly where z > 0.
    GS_RETURN_IF_ERROR(ReluBackward(
        da, s.acts[l].get(), static_cast<size_t>(batch) * in, s.compute));
  }
  // The staging slot may be overwritten once everything above has run.
  GS_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.compute_done[slot], s.compute));

  GS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(s.loss_ready));
  double loss = 0;
  const double* row_loss = s.row_loss_host.get();
  for (int r = 0; r < batch; ++r) loss += row_loss[r];
  return static_cast<float>(loss / batch);
}

absl::StatusOr<std::pair<double, int64_t>> CudaMlp::Evaluate(
    const float* x_host, const uint8_t* y_host, int64_t n) {
  State& s = *s_;
  if (n <= 0) return std::make_pair(0.0, int64_t{0});
  GS_CUDA_RETURN_IF_ERROR(cudaSetDevice(s.device));
  const int in = s.spec.widths[0];
  const int layers = num_layers();
  const int classes = s.spec.widths[layers];
  const int64_t block = s.max_batch;
  if (!s.eval_x) {
    GS_RETURN_IF_ERROR(
        DeviceAlloc(static_cast<size_t>(block) * in, &s.eval_x));
    GS_RETURN_IF_ERROR(DeviceAlloc(static_cast<size_t>(block), &s.eval_y));
  }
  double loss = 0;
  int64_t correct = 0;
  for (int64_t begin = 0; begin < n; begin += block) {
    const int rows = static_cast<int>(std::min(block, n - begin));
    GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        s.eval_x.get(), x_host + begin * in,
        static_cast<size_t>(rows) * in * sizeof(float), cudaMemcpyHostToDevice,
        s.compute));
    GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        s.eval_y.get(), y_host + begin, static_cast<size_t>(rows),
        cudaMemcpyHostToDevice, s.compute));
    GS_RETURN_IF_ERROR(Forward(s.eval_x.get(), rows));
    GS_RETURN_IF_ERROR(SoftmaxCrossEntropy(
        s.acts[layers].get(), s.eval_y.get(), rows, classes, 1.0f,
        /*dlogits_dev=*/nullptr, s.row_loss_dev.get(), s.row_pred_dev.get(),
        s.compute));
    GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        s.row_loss_host.get(), s.row_loss_dev.get(),
        static_cast<size_t>(rows) * sizeof(double), cudaMemcpyDeviceToHost,
        s.compute));
    GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        s.row_pred_host.get(), s.row_pred_dev.get(),
        static_cast<size_t>(rows) * sizeof(int32_t), cudaMemcpyDeviceToHost,
        s.compute));
    GS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s.compute));
    for (int r = 0; r < rows; ++r) {
      const uint8_t label = y_host[begin + r];
      if (label < classes) {
        loss += s.row_loss_host.get()[r];
        if (s.row_pred_host.get()[r] == label) ++correct;
      }
    }
  }
  return std::make_pair(loss / static_cast<double>(n), correct);
}

}  // namespace cuda
}  // namespace gradsync
