// Internal to gradsync_cuda's host files (cuda_backend_host.cc,
// cuda_mlp_host.cc): the return-if-error macros over CUDA, cuBLAS, Status and
// StatusOr results, and the device helpers both files use. Host C++ only.
#ifndef GRADSYNC_WORKER_MODEL_CUDA_CUDA_HOST_INTERNAL_H_
#define GRADSYNC_WORKER_MODEL_CUDA_CUDA_HOST_INTERNAL_H_

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/status/status.h"
#include "worker/model/cuda/cuda_handles.h"

// Return-if-error helpers; the failed expression is the "what" of the
// message, next to the CUDA error's name and text.
#define GS_CUDA_RETURN_IF_ERROR(expr)                                     \
  do {                                                                    \
    const cudaError_t gs_cuda_err_ = (expr);                              \
    if (gs_cuda_err_ != cudaSuccess) {                                    \
      return ::gradsync::cuda::internal::CudaStatus(gs_cuda_err_, #expr); \
    }                                                                     \
  } while (0)

#define GS_CUBLAS_RETURN_IF_ERROR(expr)                                      \
  do {                                                                       \
    const cublasStatus_t gs_cublas_st_ = (expr);                             \
    if (gs_cublas_st_ != CUBLAS_STATUS_SUCCESS) {                            \
      return ::gradsync::cuda::internal::CublasStatus(gs_cublas_st_, #expr); \
    }                                                                        \
  } while (0)

#define GS_RETURN_IF_ERROR(expr)             \
  do {                                       \
    absl::Status gs_status_ = (expr);        \
    if (!gs_status_.ok()) return gs_status_; \
  } while (0)

// Assigns the value of a StatusOr expression to `lhs`, or returns its error.
#define GS_ASSIGN_OR_RETURN(lhs, expr)                   \
  do {                                                   \
    auto gs_or_ = (expr);                                \
    if (!gs_or_.ok()) return std::move(gs_or_).status(); \
    lhs = std::move(*gs_or_);                            \
  } while (0)

namespace gradsync {
namespace cuda {
namespace internal {

inline cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

// OK if `device` is one of this process's CUDA devices; FAILED_PRECONDITION
// naming it and how many there are otherwise.
absl::Status CheckDevice(int device);

// Makes `device` (which exists) current on the calling thread; the first
// time per device in this process, switches it to blocking synchronisation
// (cuda_backend_host.cc, EnableBlockingSync).
absl::Status UseDevice(int device);

}  // namespace internal
}  // namespace cuda
}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_CUDA_CUDA_HOST_INTERNAL_H_
