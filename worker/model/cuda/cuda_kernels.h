// Internal to gradsync_cuda: launchers of the kernels in cuda_backend.cu.
//
// Kept free of absl so that only plain CUDA code goes through nvcc; the
// Status-returning public API (cuda_backend.h) wraps these in
// cuda_backend_host.cc. Every launcher enqueues on `stream`, returns
// cudaSuccess without launching for empty inputs, and otherwise returns
// cudaGetLastError() after the launch. Contracts are those of the matching
// functions in cuda_backend.h.
#ifndef GRADSYNC_WORKER_MODEL_CUDA_CUDA_KERNELS_H_
#define GRADSYNC_WORKER_MODEL_CUDA_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace gradsync {
namespace cuda {
namespace internal {

cudaError_t LaunchAddInto(float* dst, const float* src, size_t n, cudaStream_t stream);
cudaError_t LaunchScale(float* x, float a, size_t n, cudaStream_t stream);

cudaError_t LaunchBiasActivation(float* z, const float* b, int rows, int cols, bool relu,
                                 cudaStream_t stream);
cudaError_t LaunchSoftmaxCrossEntropy(const float* logits, const uint8_t* y, int rows,
                                      int classes, float inv_batch, float* dlogits,
                                      double* row_loss, int32_t* row_pred,
                                      cudaStream_t stream);
// Bias gradient gb[j] = sum_r dz[r][j] in two deterministic passes:
//  1. the rows are cut into tiles of kBiasRowTile rows; one block of
//     kBiasThreads threads reduces a tile for a group of `cw` adjacent columns
//     (cw = the smallest power of two >= cols, at most 32; the other
//     kBiasThreads / cw threads are row lanes): lane i sums rows i, i + lanes,
//     ... of the tile in order, then the lanes are added in a fixed binary
//     tree, giving one partial sum per (tile, column);
//  2. with more than one tile, one thread per column adds the partials of
//     tiles 0, 1, ... in order (with one tile, pass 1 writes gb directly).
// The order of additions depends only on (rows, cols): bitwise the same from
// run to run and on every GPU, but not the CPU's row-by-row order.
inline constexpr int kBiasRowTile = 1024;
inline constexpr int kBiasThreads = 256;

// Floats of scratch space LaunchBiasGradient needs for [rows][cols]: 0 when
// the rows fit in one tile.
inline size_t BiasGradientScratchFloats(int rows, int cols) {
  if (rows <= kBiasRowTile || cols <= 0) return 0;
  const size_t tiles = (static_cast<size_t>(rows) + kBiasRowTile - 1) / kBiasRowTile;
  return tiles * static_cast<size_t>(cols);
}

// `scratch` holds BiasGradientScratchFloats(rows, cols) floats (may be null
// when that is 0). rows == 0 writes zeros.
cudaError_t LaunchBiasGradient(const float* dz, int rows, int cols, float* gb,
                               float* scratch, cudaStream_t stream);
cudaError_t LaunchReluBackward(float* da, const float* a, size_t n, cudaStream_t stream);

// v = mu*v + g; p -= lr*v   (v == nullptr: p -= lr*g), elements [0, n).
cudaError_t LaunchSgd(float* p, const float* g, float* v, size_t n, float lr, float mu,
                      cudaStream_t stream);

// Adam with precomputed one_minus_b1 = 1-b1, one_minus_b2 = 1-b2 (float, as
// the CPU computes them) and bias corrections c1 = 1/(1-b1^t),
// c2 = 1/(1-b2^t), elements [0, n).
cudaError_t LaunchAdam(float* p, const float* g, float* m, float* v, size_t n, float lr,
                       float b1, float one_minus_b1, float b2, float one_minus_b2,
                       float eps, float c1, float c2, cudaStream_t stream);

}  // namespace internal
}  // namespace cuda
}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_CUDA_CUDA_KERNELS_H_
