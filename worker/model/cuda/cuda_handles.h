// Internal to gradsync_cuda (host C++ only: includes the CUDA runtime and
// cuBLAS headers, so nvcc never needs it): owning wrappers of CUDA streams,
// events, cuBLAS handles, device and pinned arrays, and the one conversion of
// CUDA / cuBLAS error codes into absl::Status.
//
// Every wrapper is move-only and frees its handle in the destructor, ignoring
// errors (destructors cannot report them). Freeing does NOT wait for work
// that still uses the handle: an owner synchronises its streams first (see
// CudaMlp::State and CudaModel), so that no kernel or copy touches memory
// after it has been freed. Handles belong to the device that was current at
// Create; the owner makes that device current before destroying them.
#ifndef GRADSYNC_WORKER_MODEL_CUDA_CUDA_HANDLES_H_
#define GRADSYNC_WORKER_MODEL_CUDA_CUDA_HANDLES_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gradsync {
namespace cuda {
namespace internal {

// INTERNAL "CUDA error while <what>: cudaErrorX (message)"; OK for
// cudaSuccess. Clears the runtime's last (non-sticky) error so that it is not
// reported again by an unrelated later call.
inline absl::Status CudaStatus(cudaError_t e, absl::string_view what) {
  if (e == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  return absl::InternalError(absl::StrCat("CUDA error while ", what, ": ",
                                          cudaGetErrorName(e), " (",
                                          cudaGetErrorString(e), ")"));
}

inline absl::Status CublasStatus(cublasStatus_t s, absl::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cuBLAS error while ", what, ": ",
                                          cublasGetStatusName(s), " (",
                                          cublasGetStatusString(s), ")"));
}

// Moves `other`'s handle out, leaving a null one behind.
template <typename H>
H Take(H& other) {
  return std::exchange(other, H{});
}

// A non-blocking stream (no implicit ordering with the legacy stream).
class Stream {
 public:
  static absl::StatusOr<Stream> Create() {
    Stream s;
    absl::Status st = CudaStatus(cudaStreamCreateWithFlags(&s.s_, cudaStreamNonBlocking),
                                 "creating a stream");
    if (!st.ok()) return st;
    return s;
  }
  Stream() = default;
  Stream(Stream&& o) noexcept : s_(Take(o.s_)) {}
  Stream& operator=(Stream&& o) noexcept {
    if (this != &o) {
      Reset();
      s_ = Take(o.s_);
    }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { Reset(); }

  cudaStream_t get() const { return s_; }
  // Errors ignored (used in destructors before freeing memory).
  void SynchronizeQuietly() const {
    if (s_ != nullptr) cudaStreamSynchronize(s_);
  }

 private:
  void Reset() {
    if (s_ != nullptr) cudaStreamDestroy(s_);
    s_ = nullptr;
  }
  cudaStream_t s_ = nullptr;
};

// An event without timing (cheaper to record and wait on). A never-recorded
// event counts as complete: waiting on it is a no-op.
class Event {
 public:
  // kDeviceOnly: waited on by streams (cudaStreamWaitEvent) only.
  // kHostWaited: also waited on by host threads (cudaEventSynchronize),
  // which then sleep (cudaEventBlockingSync) instead of spinning, whatever
  // scheduling the device's context ended up with.
  enum class Use { kDeviceOnly, kHostWaited };
  static absl::StatusOr<Event> Create(Use use) {
    Event e;
    const unsigned flags =
        cudaEventDisableTiming | (use == Use::kHostWaited ? cudaEventBlockingSync : 0u);
    absl::Status st =
        CudaStatus(cudaEventCreateWithFlags(&e.e_, flags), "creating an event");
    if (!st.ok()) return st;
    return e;
  }
  Event() = default;
  Event(Event&& o) noexcept : e_(Take(o.e_)) {}
  Event& operator=(Event&& o) noexcept {
    if (this != &o) {
      Reset();
      e_ = Take(o.e_);
    }
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { Reset(); }

  cudaEvent_t get() const { return e_; }

 private:
  void Reset() {
    if (e_ != nullptr) cudaEventDestroy(e_);
    e_ = nullptr;
  }
  cudaEvent_t e_ = nullptr;
};

class BlasHandle {
 public:
  static absl::StatusOr<BlasHandle> Create() {
    BlasHandle b;
    absl::Status st = CublasStatus(cublasCreate(&b.h_), "creating a handle");
    if (!st.ok()) return st;
    return b;
  }
  BlasHandle() = default;
  BlasHandle(BlasHandle&& o) noexcept : h_(Take(o.h_)) {}
  BlasHandle& operator=(BlasHandle&& o) noexcept {
    if (this != &o) {
      Reset();
      h_ = Take(o.h_);
    }
    return *this;
  }
  BlasHandle(const BlasHandle&) = delete;
  BlasHandle& operator=(const BlasHandle&) = delete;
  ~BlasHandle() { Reset(); }

  cublasHandle_t get() const { return h_; }

 private:
  void Reset() {
    if (h_ != nullptr) cublasDestroy(h_);
    h_ = nullptr;
  }
  cublasHandle_t h_ = nullptr;
};

// `count` elements of T in device memory (uninitialised); count == 0 gives
// an empty array with get() == nullptr and touches no CUDA API.
template <typename T>
class DeviceArray {
 public:
  static absl::StatusOr<DeviceArray> Allocate(size_t count, absl::string_view what) {
    DeviceArray a;
    if (count == 0) return a;
    void* p = nullptr;
    absl::Status st = CudaStatus(cudaMalloc(&p, count * sizeof(T)),
                                 absl::StrCat("allocating ", count * sizeof(T),
                                              " bytes of device memory for ", what));
    if (!st.ok()) return st;
    a.p_ = static_cast<T*>(p);
    a.n_ = count;
    return a;
  }
  DeviceArray() = default;
  DeviceArray(DeviceArray&& o) noexcept : p_(Take(o.p_)), n_(Take(o.n_)) {}
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      Reset();
      p_ = Take(o.p_);
      n_ = Take(o.n_);
    }
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { Reset(); }

  T* get() const { return p_; }
  size_t size() const { return n_; }

 private:
  void Reset() {
    if (p_ != nullptr) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  size_t n_ = 0;
};

// `count` elements of T in page-locked host memory (uninitialised), so that
// cudaMemcpyAsync from / to it is truly asynchronous.
template <typename T>
class PinnedArray {
 public:
  static absl::StatusOr<PinnedArray> Allocate(size_t count, absl::string_view what) {
    PinnedArray a;
    if (count == 0) return a;
    void* p = nullptr;
    absl::Status st = CudaStatus(cudaMallocHost(&p, count * sizeof(T)),
                                 absl::StrCat("allocating ", count * sizeof(T),
                                              " bytes of pinned host memory for ", what));
    if (!st.ok()) return st;
    a.p_ = static_cast<T*>(p);
    a.n_ = count;
    return a;
  }
  PinnedArray() = default;
  PinnedArray(PinnedArray&& o) noexcept : p_(Take(o.p_)), n_(Take(o.n_)) {}
  PinnedArray& operator=(PinnedArray&& o) noexcept {
    if (this != &o) {
      Reset();
      p_ = Take(o.p_);
      n_ = Take(o.n_);
    }
    return *this;
  }
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
  ~PinnedArray() { Reset(); }

  T* get() const { return p_; }
  size_t size() const { return n_; }

 private:
  void Reset() {
    if (p_ != nullptr) cudaFreeHost(p_);
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace internal
}  // namespace cuda
}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_CUDA_CUDA_HANDLES_H_
