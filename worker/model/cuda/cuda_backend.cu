// CUDA kernels of the gradsync backend and their launchers (see
// cuda_kernels.h). Plain CUDA: no absl here.
//
// Arithmetic that must match the CPU bit for bit is written with the
// explicitly rounded intrinsics (__fadd_rn, __fmul_rn, ...), which nvcc never
// contracts into fused multiply-adds; the CPU build (x86-64, no -mfma) rounds
// every operation separately too.
#include <cuda_runtime.h>

#include <cfloat>
#include <climits>
#include <cstddef>
#include <cstdint>

#include "worker/model/cuda/cuda_kernels.h"

namespace gradsync {
namespace cuda {
namespace internal {
namespace {

constexpr int kThreads = 256;
// Grid-stride loops cap the grid; 8192 * 256 threads saturate any current GPU.
constexpr size_t kMaxBlocks = 8192;

unsigned GridFor(size_t n) {
  size_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return static_cast<unsigned>(blocks);
}

__device__ __forceinline__ size_t GlobalIndex() {
  return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ size_t GlobalStride() {
  return static_cast<size_t>(gridDim.x) * blockDim.x;
}

__global__ void AddIntoKernel(float* dst, const float* src, size_t n) {
  for (size_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    dst[i] = __fadd_rn(dst[i], src[i]);
  }
}

__global__ void ScaleKernel(float* x, float a, size_t n) {
  for (size_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    x[i] = __fmul_rn(x[i], a);
  }
}

__global__ void BiasActivationKernel(float* z, const float* b, size_t n, unsigned cols,
                                     bool relu) {
  for (size_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    float v = __fadd_rn(z[i], b[i % cols]);
    // std::max(v, 0.0f) == (v < 0) ? 0 : v; keeps -0.0 and NaN like the CPU.
    if (relu && v < 0.0f) v = 0.0f;
    z[i] = v;
  }
}

__global__ void ReluBackwardKernel(float* da, const float* a, size_t n) {
  for (size_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    if (a[i] <= 0.0f) da[i] = 0.0f;
  }
}

// Pass 1 of the bias gradient (see cuda_kernels.h): block (x, y) reduces
// tiles y, y + gridDim.y, ... of columns [x * cw, (x + 1) * cw). Thread t
// handles column t % cw (adjacent threads read adjacent columns) in row lane
// t / cw. Writes out[tile * cols + col].
__global__ void BiasGradientPartialKernel(const float* dz, int rows, int cols,
                                          int cw_log2, int tiles, float* out) {
  __shared__ float s[kBiasThreads];
  const int cw = 1 << cw_log2;
  const int lanes = kBiasThreads >> cw_log2;
  const int c = threadIdx.x & (cw - 1);
  const int lane = threadIdx.x >> cw_log2;
  const int col = blockIdx.x * cw + c;
  // The loop bounds are the same for every thread of the block, so the
  // __syncthreads() inside are reached by all of them.
  for (int tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
    const int r0 = tile * kBiasRowTile;
    const int r1 = min(rows, r0 + kBiasRowTile);
    float acc = 0.0f;
    if (col < cols) {
      const float* p = dz + col;
      for (int r = r0 + lane; r < r1; r += lanes) {
        acc = __fadd_rn(acc, p[static_cast<size_t>(r) * cols]);
      }
    }
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int half = lanes >> 1; half > 0; half >>= 1) {
      if (lane < half) {
        s[threadIdx.x] = __fadd_rn(s[threadIdx.x], s[threadIdx.x + half * cw]);
      }
      __syncthreads();
    }
    if (lane == 0 && col < cols) {
      out[static_cast<size_t>(tile) * cols + col] = s[c];
    }
    __syncthreads();  // s is overwritten by the next tile
  }
}

// Pass 2: gb[j] = partial[0][j] + partial[1][j] + ... in tile order.
__global__ void BiasGradientFinalKernel(const float* partial, int tiles, size_t cols,
                                        float* gb) {
  for (size_t j = GlobalIndex(); j < cols; j += GlobalStride()) {
    float s = 0.0f;
    for (int t = 0; t < tiles; ++t) s = __fadd_rn(s, partial[t * cols + j]);
    gb[j] = s;
  }
}

// (value, index) of a running first-argmax; index -1 = nothing seen yet.
struct ArgMax {
  float value;
  int index;
};

__device__ __forceinline__ ArgMax Better(ArgMax a, ArgMax b) {
  if (a.index < 0) return b;
  if (b.index < 0) return a;
  if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
  return a;
}

// One block of kThreads threads per row.
__global__ void SoftmaxCrossEntropyKernel(const float* logits, const uint8_t* y,
                                          int classes, float inv_batch, float* dlogits,
                                          double* row_loss, int32_t* row_pred) {
  __shared__ ArgMax s_max[kThreads];
  __shared__ double s_sum[kThreads];
  const int r = blockIdx.x;
  const int tid = threadIdx.x;
  const float* z = logits + static_cast<size_t>(r) * classes;

  // 1. Row maximum and its first index. Each thread scans increasing j, so
  //    a strict > keeps its first maximum; Better() breaks ties by index.
  ArgMax best{-FLT_MAX, -1};
  for (int j = tid; j < classes; j += kThreads) {
    const float v = z[j];
    if (best.index < 0 || v > best.value) best = ArgMax{v, j};
  }
  s_max[tid] = best;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (tid < half) s_max[tid] = Better(s_max[tid], s_max[tid + half]);
    __syncthreads();
  }
  const float zmax = s_max[0].value;
  const int pred = s_max[0].index;

  // 2. log(sum_j exp(z_j - max)) in double; z_j - max rounded in float first,
  //    as the CPU does.
  double s = 0.0;
  for (int j = tid; j < classes; j += kThreads) {
    s += exp(static_cast<double>(__fsub_rn(z[j], zmax)));
  }
  s_sum[tid] = s;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (tid < half) s_sum[tid] += s_sum[tid + half];
    __syncthreads();
  }
  const double lse = log(s_sum[0]);
  const int label = y[r];

  // 3. dlogits = softmax / batch - onehot / batch.
  if (dlogits != nullptr) {
    float* d = dlogits + static_cast<size_t>(r) * classes;
    for (int j = tid; j < classes; j += kThreads) {
      const double e = exp(static_cast<double>(__fsub_rn(z[j], zmax)) - lse);
      float v = __fmul_rn(static_cast<float>(e), inv_batch);
      if (j == label) v = __fsub_rn(v, inv_batch);
      d[j] = v;
    }
  }
  if (tid == 0) {
    row_loss[r] =
        label < classes ? lse - static_cast<double>(__fsub_rn(z[label], zmax)) : 0.0;
    if (row_pred != nullptr) row_pred[r] = pred;
  }
}

__global__ void SgdKernel(float* p, const float* g, float* v, size_t n, float lr,
                          float mu) {
  for (size_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    if (v == nullptr) {
      p[i] = __fsub_rn(p[i], __fmul_rn(lr, g[i]));
    } else {
      const float vi = __fadd_rn(__fmul_rn(mu, v[i]), g[i]);
      v[i] = vi;
      p[i] = __fsub_rn(p[i], __fmul_rn(lr, vi));
    }
  }
}

__global__ void AdamKernel(float* p, const float* g, float* m, float* v, size_t n,
                           float lr, float b1, float one_minus_b1, float b2,
                           float one_minus_b2, float eps, float c1, float c2) {
  for (size_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const float gi = g[i];
    // Same association as common/optimizer.cc:
    //   m = b1*m + (1-b1)*g;  v = b2*v + ((1-b2)*g)*g
    //   p -= (lr*mhat) / (sqrt(vhat) + eps)
    const float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(one_minus_b1, gi));
    const float vi =
        __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(one_minus_b2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const float mhat = __fmul_rn(mi, c1);
    const float vhat = __fmul_rn(vi, c2);
    const float step = __fdiv_rn(__fmul_rn(lr, mhat), __fadd_rn(__fsqrt_rn(vhat), eps));
    p[i] = __fsub_rn(p[i], step);
  }
}

}  // namespace

cudaError_t LaunchAddInto(float* dst, const float* src, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  AddIntoKernel<<<GridFor(n), kThreads, 0, stream>>>(dst, src, n);
  return cudaGetLastError();
}

cudaError_t LaunchScale(float* x, float a, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ScaleKernel<<<GridFor(n), kThreads, 0, stream>>>(x, a, n);
  return cudaGetLastError();
}

cudaError_t LaunchBiasActivation(float* z, const float* b, int rows, int cols, bool relu,
                                 cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  BiasActivationKernel<<<GridFor(n), kThreads, 0, stream>>>(
      z, b, n, static_cast<unsigned>(cols), relu);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxCrossEntropy(const float* logits, const uint8_t* y, int rows,
                                      int classes, float inv_batch, float* dlogits,
                                      double* row_loss, int32_t* row_pred,
                                      cudaStream_t stream) {
  if (rows <= 0 || classes <= 0) return cudaSuccess;
  SoftmaxCrossEntropyKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      logits, y, classes, inv_batch, dlogits, row_loss, row_pred);
  return cudaGetLastError();
}

cudaError_t LaunchBiasGradient(const float* dz, int rows, int cols, float* gb,
                               float* scratch, cudaStream_t stream) {
  if (cols <= 0) return cudaSuccess;
  if (rows <= 0) {
    return cudaMemsetAsync(gb, 0, static_cast<size_t>(cols) * sizeof(float), stream);
  }
  int cw_log2 = 0;
  while ((1 << cw_log2) < cols && (1 << cw_log2) < 32) ++cw_log2;
  const int tiles = (rows + kBiasRowTile - 1) / kBiasRowTile;
  if (tiles > 1 && scratch == nullptr) return cudaErrorInvalidValue;
  const unsigned col_groups =
      static_cast<unsigned>((cols + (1 << cw_log2) - 1) >> cw_log2);
  // gridDim.y is limited to 65535; further tiles are grid-strided.
  const dim3 grid(col_groups, static_cast<unsigned>(tiles < 65535 ? tiles : 65535));
  BiasGradientPartialKernel<<<grid, kBiasThreads, 0, stream>>>(
      dz, rows, cols, cw_log2, tiles, tiles == 1 ? gb : scratch);
  if (tiles > 1) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    BiasGradientFinalKernel<<<GridFor(static_cast<size_t>(cols)), kThreads, 0, stream>>>(
        scratch, tiles, static_cast<size_t>(cols), gb);
  }
  return cudaGetLastError();
}

cudaError_t LaunchReluBackward(float* da, const float* a, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ReluBackwardKernel<<<GridFor(n), kThreads, 0, stream>>>(da, a, n);
  return cudaGetLastError();
}

cudaError_t LaunchSgd(float* p, const float* g, float* v, size_t n, float lr, float mu,
                      cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SgdKernel<<<GridFor(n), kThreads, 0, stream>>>(p, g, v, n, lr, mu);
  return cudaGetLastError();
}

cudaError_t LaunchAdam(float* p, const float* g, float* m, float* v, size_t n, float lr,
                       float b1, float one_minus_b1, float b2, float one_minus_b2,
                       float eps, float c1, float c2, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  AdamKernel<<<GridFor(n), kThreads, 0, stream>>>(p, g, m, v, n, lr, b1, one_minus_b1, b2,
                                                  one_minus_b2, eps, c1, c2);
  return cudaGetLastError();
}

}  // namespace internal
}  // namespace cuda
}  // namespace gradsync
