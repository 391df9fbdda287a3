// CudaMlp (cuda_backend.h): the MLP's parameters, activations and batches on
// one CUDA device, forward and backward with cuBLAS and the kernels of
// cuda_backend.cu, double-buffered batch staging and pending losses, and
// evaluation in blocks. Host C++ against the CUDA runtime and cuBLAS C APIs.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/model/cuda/cuda_backend.h"
#include "worker/model/cuda/cuda_handles.h"
#include "worker/model/cuda/cuda_host_internal.h"

namespace gradsync {
namespace cuda {
namespace {

using internal::BlasHandle;
using internal::CheckDevice;
using internal::CudaStatus;
using internal::DeviceArray;
using internal::Event;
using internal::PinnedArray;
using internal::Stream;
using internal::UseDevice;

}  // namespace

struct CudaMlp::State {
  // Waits for everything enqueued on this model's streams before the
  // members (declared below, destroyed after this body) are freed. Errors
  // are ignored: a destructor cannot report them.
  ~State() {
    cudaSetDevice(device);
    compute.SynchronizeQuietly();
    staging.SynchronizeQuietly();
  }

  // Constant after Create.
  MlpSpec spec;
  int device = 0;
  int max_batch = 0;
  size_t num_params = 0;
  std::vector<size_t> w_offset;
  std::vector<size_t> b_offset;

  // Streams first: destroyed last, after every buffer they use.
  Stream compute;
  Stream staging;  // host-to-device copies of training batches
  BlasHandle blas;

  DeviceArray<float> params;
  DeviceArray<float> grad;
  // acts[l], l = 1..L: layer outputs [max_batch][widths[l]] (post-ReLU for
  // hidden layers, logits for l = L); act_ptrs[l] = acts[l].get(). Layer 0's
  // input is read straight from the staged batch.
  std::vector<DeviceArray<float>> acts;
  std::vector<float*> act_ptrs;
  // deltas[l], l = 1..L: d(mean loss)/d(z_l), same shapes as acts[l].
  std::vector<DeviceArray<float>> deltas;
  DeviceArray<float> bias_scratch;  // BiasGradient partial sums

  // Double-buffered training input.
  struct InputSlot {
    PinnedArray<float> x_pin;
    PinnedArray<uint8_t> y_pin;
    DeviceArray<float> x_dev;
    DeviceArray<uint8_t> y_dev;
    Event copied;    // the staging copy has finished reading x_pin / y_pin
    Event consumed;  // the last ForwardBackward reading x_dev / y_dev is done
    int rows = 0;
  };
  InputSlot input[2];
  int staged = -1;  // slot of the most recent StageBatch, -1 = none

  // Pending losses: ForwardBackward copies its per-row losses into the next
  // ring slot behind the forward pass; TakeLoss waits for the oldest.
  struct LossSlot {
    PinnedArray<double> rows_host;
    Event ready;
    int rows = 0;
  };
  DeviceArray<double> row_loss_dev;
  LossSlot loss[kMaxPendingLosses];
  std::deque<int> pending_loss;  // slots, oldest first
  int next_loss = 0;

  // Evaluation, allocated on first use for eval_rows rows per block.
  struct EvalSlot {
    PinnedArray<float> x_pin;
    PinnedArray<uint8_t> y_pin;
    PinnedArray<double> loss_host;
    PinnedArray<int32_t> pred_host;
    Event done;  // the block's results are in loss_host / pred_host
    int64_t begin = 0;
    int rows = 0;
  };
  int64_t eval_rows = 0;
  std::vector<DeviceArray<float>> eval_acts;
  std::vector<float*> eval_act_ptrs;
  DeviceArray<float> eval_x;
  DeviceArray<uint8_t> eval_y;
  DeviceArray<double> eval_loss;
  DeviceArray<int32_t> eval_pred;
  EvalSlot eval[2];
};

absl::Status CudaMlp::AllocateBuffers(State* s) {
  const MlpSpec& spec = s->spec;
  const int max_batch = s->max_batch;
  const int layers = static_cast<int>(spec.widths.size()) - 1;
  GS_ASSIGN_OR_RETURN(s->params,
                      DeviceArray<float>::Allocate(s->num_params, "parameters"));
  GS_ASSIGN_OR_RETURN(s->grad, DeviceArray<float>::Allocate(s->num_params, "gradient"));
  const size_t rows = static_cast<size_t>(max_batch);
  s->acts.resize(layers + 1);
  s->deltas.resize(layers + 1);
  s->act_ptrs.assign(layers + 1, nullptr);
  size_t scratch = 0;
  for (int l = 1; l <= layers; ++l) {
    const size_t count = rows * static_cast<size_t>(spec.widths[l]);
    GS_ASSIGN_OR_RETURN(s->acts[l], DeviceArray<float>::Allocate(count, "activations"));
    GS_ASSIGN_OR_RETURN(s->deltas[l], DeviceArray<float>::Allocate(count, "deltas"));
    s->act_ptrs[l] = s->acts[l].get();
    scratch = std::max(scratch, BiasGradientScratchFloats(max_batch, spec.widths[l]));
  }
  GS_ASSIGN_OR_RETURN(s->bias_scratch,
                      DeviceArray<float>::Allocate(scratch, "bias-gradient partials"));
  const size_t x_count = rows * static_cast<size_t>(spec.widths[0]);
  for (State::InputSlot& in : s->input) {
    GS_ASSIGN_OR_RETURN(in.x_pin, PinnedArray<float>::Allocate(x_count, "batch staging"));
    GS_ASSIGN_OR_RETURN(in.y_pin, PinnedArray<uint8_t>::Allocate(rows, "label staging"));
    GS_ASSIGN_OR_RETURN(in.x_dev, DeviceArray<float>::Allocate(x_count, "batch input"));
    GS_ASSIGN_OR_RETURN(in.y_dev, DeviceArray<uint8_t>::Allocate(rows, "batch labels"));
    GS_ASSIGN_OR_RETURN(in.copied, Event::Create(Event::Use::kHostWaited));
    GS_ASSIGN_OR_RETURN(in.consumed, Event::Create(Event::Use::kDeviceOnly));
  }
  GS_ASSIGN_OR_RETURN(s->row_loss_dev, DeviceArray<double>::Allocate(rows, "row losses"));
  for (State::LossSlot& ls : s->loss) {
    GS_ASSIGN_OR_RETURN(ls.rows_host, PinnedArray<double>::Allocate(rows, "loss ring"));
    GS_ASSIGN_OR_RETURN(ls.ready, Event::Create(Event::Use::kHostWaited));
  }
  const cudaStream_t compute = s->compute.get();
  GS_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(s->params.get(), 0, s->num_params * sizeof(float), compute));
  GS_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(s->grad.get(), 0, s->num_params * sizeof(float), compute));
  GS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaMlp>> CudaMlp::Create(const MlpSpec& spec, int device,
                                                         bool allow_tf32, int max_batch) {
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
  GS_RETURN_IF_ERROR(UseDevice(device));

  auto s = std::make_unique<State>();
  s->spec = spec;
  s->device = device;
  s->max_batch = max_batch;
  const int layers = static_cast<int>(spec.widths.size()) - 1;
  for (int l = 0; l < layers; ++l) {
    const size_t in = static_cast<size_t>(spec.widths[l]);
    const size_t out = static_cast<size_t>(spec.widths[l + 1]);
    s->w_offset.push_back(s->num_params);
    s->b_offset.push_back(s->num_params + out * in);
    s->num_params += out * in + out;
  }

  GS_ASSIGN_OR_RETURN(s->compute, Stream::Create());
  GS_ASSIGN_OR_RETURN(s->staging, Stream::Create());
  GS_ASSIGN_OR_RETURN(s->blas, BlasHandle::Create());
  GS_CUBLAS_RETURN_IF_ERROR(cublasSetStream(s->blas.get(), s->compute.get()));
  GS_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(
      s->blas.get(), allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  GS_CUBLAS_RETURN_IF_ERROR(
      cublasSetPointerMode(s->blas.get(), CUBLAS_POINTER_MODE_HOST));

  GS_RETURN_IF_ERROR(AllocateBuffers(s.get()));
  return std::unique_ptr<CudaMlp>(new CudaMlp(std::move(s)));
}

CudaMlp::CudaMlp(std::unique_ptr<State> state) : s_(std::move(state)) {}

CudaMlp::~CudaMlp() = default;

const MlpSpec& CudaMlp::spec() const { return s_->spec; }
int CudaMlp::device() const { return s_->device; }
int CudaMlp::max_batch() const { return s_->max_batch; }
size_t CudaMlp::num_params() const { return s_->num_params; }
int CudaMlp::num_layers() const { return static_cast<int>(s_->spec.widths.size()) - 1; }

Range CudaMlp::LayerRange(int l) const {
  const size_t in = static_cast<size_t>(s_->spec.widths[l]);
  const size_t out = static_cast<size_t>(s_->spec.widths[l + 1]);
  return Range{s_->w_offset[l], out * in + out};
}

float* CudaMlp::params() { return s_->params.get(); }
float* CudaMlp::grad() { return s_->grad.get(); }
void* CudaMlp::compute_stream() { return s_->compute.get(); }
int CudaMlp::pending_losses() const { return static_cast<int>(s_->pending_loss.size()); }

absl::Status CudaMlp::UploadParams(const float* host) {
  GS_CUDA_RETURN_IF_ERROR(cudaSetDevice(s_->device));
  GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s_->params.get(), host,
                                          s_->num_params * sizeof(float),
                                          cudaMemcpyHostToDevice, s_->compute.get()));
  GS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s_->compute.get()));
  return absl::OkStatus();
}

absl::Status CudaMlp::DownloadParams(float* host) {
  GS_CUDA_RETURN_IF_ERROR(cudaSetDevice(s_->device));
  GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, s_->params.get(),
                                          s_->num_params * sizeof(float),
                                          cudaMemcpyDeviceToHost, s_->compute.get()));
  GS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s_->compute.get()));
  return absl::OkStatus();
}

absl::Status CudaMlp::DownloadGrad(float* host) {
  GS_CUDA_RETURN_IF_ERROR(cudaSetDevice(s_->device));
  GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, s_->grad.get(),
                                          s_->num_params * sizeof(float),
                                          cudaMemcpyDeviceToHost, s_->compute.get()));
  GS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s_->compute.get()));
  return absl::OkStatus();
}

absl::Status CudaMlp::StageBatch(const float* x_host, const uint8_t* y_host, int batch) {
  State& s = *s_;
  if (batch < 1 || batch > s.max_batch) {
    return absl::InvalidArgumentError(absl::StrCat("CudaMlp::StageBatch: batch ", batch,
                                                   " outside [1, max_batch=", s.max_batch,
                                                   "]"));
  }
  GS_CUDA_RETURN_IF_ERROR(cudaSetDevice(s.device));
  const int slot = s.staged < 0 ? 0 : 1 - s.staged;
  State::InputSlot& in = s.input[slot];
  // 1. The pinned slot may still be the source of the copy enqueued two
  //    stagings ago (a never-recorded event is complete).
  GS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(in.copied.get()));
  const size_t x_bytes =
      static_cast<size_t>(batch) * static_cast<size_t>(s.spec.widths[0]) * sizeof(float);
  std::memcpy(in.x_pin.get(), x_host, x_bytes);
  std::memcpy(in.y_pin.get(), y_host, static_cast<size_t>(batch));
  // 2. The device slot may still be read by the last ForwardBackward that
  //    used it: the staging stream (not the host) waits for it.
  const cudaStream_t staging = s.staging.get();
  GS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(staging, in.consumed.get(), 0));
  GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(in.x_dev.get(), in.x_pin.get(), x_bytes,
                                          cudaMemcpyHostToDevice, staging));
  GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(in.y_dev.get(), in.y_pin.get(),
                                          static_cast<size_t>(batch),
                                          cudaMemcpyHostToDevice, staging));
  GS_CUDA_RETURN_IF_ERROR(cudaEventRecord(in.copied.get(), staging));
  // 3. The next ForwardBackward reads this slot.
  in.rows = batch;
  s.staged = slot;
  return absl::OkStatus();
}

absl::Status CudaMlp::Forward(const float* x_dev, int rows,
                              const std::vector<float*>& acts) {
  State& s = *s_;
  const int layers = num_layers();
  const float one = 1.0f;
  const float zero = 0.0f;
  const float* a = x_dev;
  for (int l = 0; l < layers; ++l) {
    const int in = s.spec.widths[l];
    const int out = s.spec.widths[l + 1];
    float* z = acts[l + 1];
    // Row-major Z[rows][out] = A[rows][in] * W[out][in]^T. cuBLAS is
    // column-major, where these buffers read as Z^T (out x rows), A^T
    // (in x rows) and W^T (in x out): Z^T = (W^T)^T * A^T.
    GS_CUBLAS_RETURN_IF_ERROR(cublasSgemm(s.blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, out,
                                          rows, in, &one, s.params.get() + s.w_offset[l],
                                          in, a, in, &zero, z, out));
    GS_RETURN_IF_ERROR(BiasActivation(z, s.params.get() + s.b_offset[l], rows, out,
                                      /*relu=*/l + 1 < layers, s.compute.get()));
    a = z;
  }
  return absl::OkStatus();
}

absl::Status CudaMlp::Backward(const float* x_dev, int batch,
                               const BackwardHooks& hooks) {
  State& s = *s_;
  const int layers = num_layers();
  const float one = 1.0f;
  const float zero = 0.0f;
  for (int l = layers - 1; l >= 0; --l) {
    const int in = s.spec.widths[l];
    const int out = s.spec.widths[l + 1];
    const float* dz = s.deltas[l + 1].get();
    const float* a = l == 0 ? x_dev : s.acts[l].get();
    if (hooks.before_layer_grad) GS_RETURN_IF_ERROR(hooks.before_layer_grad(l));
    // Row-major dW[out][in] = dZ[batch][out]^T * A[batch][in]; column-major:
    // dW^T (in x out) = A^T (in x batch) * dZ (batch x out), with dZ read as
    // the transpose of the stored dZ^T (out x batch).
    GS_CUBLAS_RETURN_IF_ERROR(cublasSgemm(s.blas.get(), CUBLAS_OP_N, CUBLAS_OP_T, in, out,
                                          batch, &one, a, in, dz, out, &zero,
                                          s.grad.get() + s.w_offset[l], in));
    GS_RETURN_IF_ERROR(BiasGradient(dz, batch, out, s.grad.get() + s.b_offset[l],
                                    s.bias_scratch.get(), s.compute.get()));
    if (hooks.after_layer_grad) GS_RETURN_IF_ERROR(hooks.after_layer_grad(l));
    if (l == 0) break;  // no gradient w.r.t. the input
    // Row-major dA[batch][in] = dZ[batch][out] * W[out][in]; column-major:
    // dA^T (in x batch) = W^T (in x out) * dZ^T (out x batch).
    float* da = s.deltas[l].get();
    GS_CUBLAS_RETURN_IF_ERROR(
        cublasSgemm(s.blas.get(), CUBLAS_OP_N, CUBLAS_OP_N, in, batch, out, &one,
                    s.params.get() + s.w_offset[l], in, dz, out, &zero, da, in));
    // a = relu(z) > 0 exactly where z > 0.
    GS_RETURN_IF_ERROR(ReluBackward(da, s.acts[l].get(), static_cast<size_t>(batch) * in,
                                    s.compute.get()));
  }
  return absl::OkStatus();
}

absl::Status CudaMlp::ForwardBackward(int batch, const BackwardHooks& hooks) {
  State& s = *s_;
  if (s.staged < 0) {
    return absl::FailedPreconditionError(
        "CudaMlp::ForwardBackward: no batch staged (call StageBatch first)");
  }
  State::InputSlot& in = s.input[s.staged];
  if (batch != in.rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaMlp::ForwardBackward: batch ", batch,
                     " differs from the staged batch of ", in.rows, " rows"));
  }
  if (s.pending_loss.size() >= static_cast<size_t>(kMaxPendingLosses)) {
    return absl::FailedPreconditionError(
        absl::StrCat("CudaMlp::ForwardBackward: ", s.pending_loss.size(),
                     " losses not taken (TakeLoss) yet"));
  }
  GS_CUDA_RETURN_IF_ERROR(cudaSetDevice(s.device));
  const cudaStream_t compute = s.compute.get();
  // 1. The batch's copy (staging stream) before anything reads it.
  GS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute, in.copied.get(), 0));
  // 2. Forward, loss and dlogits.
  const int layers = num_layers();
  absl::Status st = Forward(in.x_dev.get(), batch, s.act_ptrs);
  if (st.ok()) {
    st = SoftmaxCrossEntropy(s.acts[layers].get(), in.y_dev.get(), batch,
                             s.spec.widths[layers], 1.0f / static_cast<float>(batch),
                             s.deltas[layers].get(), s.row_loss_dev.get(), nullptr,
                             compute);
  }
  // 3. The row losses to the next ring slot, behind the forward pass only.
  if (st.ok()) {
    State::LossSlot& ls = s.loss[s.next_loss];
    st = CudaStatus(cudaMemcpyAsync(ls.rows_host.get(), s.row_loss_dev.get(),
                                    static_cast<size_t>(batch) * sizeof(double),
                                    cudaMemcpyDeviceToHost, compute),
                    "copying the row losses to the host");
    if (st.ok()) {
      st = CudaStatus(cudaEventRecord(ls.ready.get(), compute),
                      "recording the loss event");
    }
    if (st.ok()) {
      ls.rows = batch;
      s.pending_loss.push_back(s.next_loss);
      s.next_loss = (s.next_loss + 1) % kMaxPendingLosses;
    }
  }
  // 4. Backward, layer by layer, with the caller's hooks.
  if (st.ok()) st = Backward(in.x_dev.get(), batch, hooks);
  // 5. The input slot may be overwritten once everything enqueued above has
  //    run; recorded even after a failure, so that a later staging still
  //    waits for whatever was enqueued.
  const absl::Status recorded = CudaStatus(cudaEventRecord(in.consumed.get(), compute),
                                           "recording the end of ForwardBackward");
  return st.ok() ? recorded : st;
}

absl::StatusOr<float> CudaMlp::TakeLoss() {
  State& s = *s_;
  if (s.pending_loss.empty()) {
    return absl::FailedPreconditionError(
        "CudaMlp::TakeLoss: no ForwardBackward with a loss not taken");
  }
  const State::LossSlot& ls = s.loss[s.pending_loss.front()];
  GS_CUDA_RETURN_IF_ERROR(cudaSetDevice(s.device));
  GS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(ls.ready.get()));
  double loss = 0;
  const double* row_loss = ls.rows_host.get();
  for (int r = 0; r < ls.rows; ++r) loss += row_loss[r];
  s.pending_loss.pop_front();
  return static_cast<float>(loss / ls.rows);
}

absl::Status CudaMlp::EnsureEvalBuffers(int64_t rows) {
  State& s = *s_;
  if (s.eval_rows >= rows) return absl::OkStatus();
  s.eval_rows = 0;  // until everything below is allocated
  const int layers = num_layers();
  const size_t n = static_cast<size_t>(rows);
  const size_t x_count = n * static_cast<size_t>(s.spec.widths[0]);
  s.eval_acts.clear();
  s.eval_acts.resize(layers + 1);
  s.eval_act_ptrs.assign(layers + 1, nullptr);
  for (int l = 1; l <= layers; ++l) {
    GS_ASSIGN_OR_RETURN(s.eval_acts[l], DeviceArray<float>::Allocate(
                                            n * static_cast<size_t>(s.spec.widths[l]),
                                            "evaluation activations"));
    s.eval_act_ptrs[l] = s.eval_acts[l].get();
  }
  GS_ASSIGN_OR_RETURN(s.eval_x,
                      DeviceArray<float>::Allocate(x_count, "evaluation input"));
  GS_ASSIGN_OR_RETURN(s.eval_y, DeviceArray<uint8_t>::Allocate(n, "evaluation labels"));
  GS_ASSIGN_OR_RETURN(s.eval_loss, DeviceArray<double>::Allocate(n, "evaluation losses"));
  GS_ASSIGN_OR_RETURN(s.eval_pred,
                      DeviceArray<int32_t>::Allocate(n, "evaluation predictions"));
  for (State::EvalSlot& e : s.eval) {
    GS_ASSIGN_OR_RETURN(e.x_pin,
                        PinnedArray<float>::Allocate(x_count, "evaluation staging"));
    GS_ASSIGN_OR_RETURN(e.y_pin,
                        PinnedArray<uint8_t>::Allocate(n, "evaluation label staging"));
    GS_ASSIGN_OR_RETURN(e.loss_host,
                        PinnedArray<double>::Allocate(n, "evaluation losses"));
    GS_ASSIGN_OR_RETURN(e.pred_host,
                        PinnedArray<int32_t>::Allocate(n, "evaluation predictions"));
    GS_ASSIGN_OR_RETURN(e.done, Event::Create(Event::Use::kHostWaited));
  }
  s.eval_rows = rows;
  return absl::OkStatus();
}

absl::StatusOr<std::pair<double, int64_t>> CudaMlp::Evaluate(const float* x_host,
                                                             const uint8_t* y_host,
                                                             int64_t n) {
  State& s = *s_;
  if (n <= 0) return std::make_pair(0.0, int64_t{0});
  GS_CUDA_RETURN_IF_ERROR(cudaSetDevice(s.device));
  const int64_t block = std::min<int64_t>(n, kEvalBlockRows);
  // Every earlier Evaluate has finished (it is synchronous), so the block
  // buffers are free to be replaced.
  GS_RETURN_IF_ERROR(EnsureEvalBuffers(block));
  const int in = s.spec.widths[0];
  const int layers = num_layers();
  const int classes = s.spec.widths[layers];
  const cudaStream_t compute = s.compute.get();
  double loss = 0;
  int64_t correct = 0;
  // Waits for a block's results and adds them up, in row order.
  auto collect = [&](const State::EvalSlot& e) -> absl::Status {
    GS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(e.done.get()));
    for (int r = 0; r < e.rows; ++r) {
      const uint8_t label = y_host[e.begin + r];
      if (label < classes) {
        loss += e.loss_host.get()[r];
        if (e.pred_host.get()[r] == label) ++correct;
      }
    }
    return absl::OkStatus();
  };
  const int64_t blocks = (n + block - 1) / block;
  for (int64_t i = 0; i < blocks; ++i) {
    State::EvalSlot& e = s.eval[i % 2];
    // 1. Block i-2 used this slot: take its results, which also frees the
    //    pinned staging buffers. Meanwhile the device computes block i-1.
    if (i >= 2) GS_RETURN_IF_ERROR(collect(e));
    e.begin = i * block;
    e.rows = static_cast<int>(std::min(block, n - e.begin));
    const size_t rows = static_cast<size_t>(e.rows);
    // 2. The block into pinned memory, then one asynchronous copy each.
    std::memcpy(e.x_pin.get(), x_host + e.begin * in, rows * in * sizeof(float));
    std::memcpy(e.y_pin.get(), y_host + e.begin, rows);
    GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s.eval_x.get(), e.x_pin.get(),
                                            rows * in * sizeof(float),
                                            cudaMemcpyHostToDevice, compute));
    GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s.eval_y.get(), e.y_pin.get(), rows,
                                            cudaMemcpyHostToDevice, compute));
    // 3. Forward and per-row loss / prediction, copied back to the slot.
    GS_RETURN_IF_ERROR(Forward(s.eval_x.get(), e.rows, s.eval_act_ptrs));
    GS_RETURN_IF_ERROR(SoftmaxCrossEntropy(
        s.eval_acts[layers].get(), s.eval_y.get(), e.rows, classes, 1.0f,
        /*dlogits_dev=*/nullptr, s.eval_loss.get(), s.eval_pred.get(), compute));
    GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(e.loss_host.get(), s.eval_loss.get(),
                                            rows * sizeof(double), cudaMemcpyDeviceToHost,
                                            compute));
    GS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(e.pred_host.get(), s.eval_pred.get(),
                                            rows * sizeof(int32_t),
                                            cudaMemcpyDeviceToHost, compute));
    GS_CUDA_RETURN_IF_ERROR(cudaEventRecord(e.done.get(), compute));
  }
  // 4. The last (up to) two blocks, in order.
  for (int64_t i = std::max<int64_t>(0, blocks - 2); i < blocks; ++i) {
    GS_RETURN_IF_ERROR(collect(s.eval[i % 2]));
  }
  return std::make_pair(loss / static_cast<double>(n), correct);
}

}  // namespace cuda
}  // namespace gradsync
