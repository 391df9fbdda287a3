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

cudaError_t LaunchAddInto(float* dst, const float* src, size_t n,
                          cudaStream_t stream);
cudaError_t LaunchScale(float* x, float a, size_t n, cudaStream_t stream);

cudaError_t LaunchBiasActivation(float* z, const float* b, int rows, int cols,
                                 bool relu, cudaStream_t stream);
cudaError_t LaunchSoftmaxCrossEntropy(const float* logits, const uint8_t* y,
                                      int rows, int classes, float inv_batch,
                                      float* dlogits, double* row_loss,
                                      int32_t* row_pred, cudaStream_t stream);
cudaError_t LaunchBiasGradient(const float* dz, int rows, int cols, float* gb,
                               cudaStream_t stream);
cudaError_t LaunchReluBackward(float* da, const float* a, size_t n,
                               cudaStream_t stream);

// v = mu*v + g; p -= lr*v   (v == nullptr: p -= lr*g), elements [0, n).
cudaError_t LaunchSgd(float* p, const float* g, float* v, size_t n, float lr,
                      float mu, cudaStream_t stream);

// Adam with precomputed one_minus_b1 = 1-b1, one_minus_b2 = 1-b2 (float, as
// the CPU computes them) and bias corrections c1 = 1/(1-b1^t),
// c2 = 1/(1-b2^t), elements [0, n).
cudaError_t LaunchAdam(float* p, const float* g, float* m, float* v, size_t n,
                       float lr, float b1, float one_minus_b1, float b2,
                       float one_minus_b2, float eps, float c1, float c2,
                       cudaStream_t stream);

}  // namespace internal
}  // namespace cuda
}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_CUDA_CUDA_KERNELS_H_
