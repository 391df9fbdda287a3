#include "worker/model/device_factory.h"

#include "worker/model/cpu_threads.h"

#include "absl/status/status.h"
#ifdef GRADSYNC_HAVE_CUDA
#include "worker/model/cuda/cuda_backend.h"
#include "worker/model/cuda/cuda_model.h"
#endif

namespace gradsync {

int VisibleGpuCount() {
#ifdef GRADSYNC_HAVE_CUDA
  return cuda::DeviceCount();
#else
  return 0;
#endif
}

absl::StatusOr<std::unique_ptr<DeviceModel>> MakeDeviceModel(
    const DeviceRequest& request) {
  if (!request.cuda) {
    SetBlasThreads(request.cpu_threads);
    return MakeCpuModel(request.model);
  }
#ifdef GRADSYNC_HAVE_CUDA
  return cuda::MakeCudaModel(request.model, request.gpu, request.allow_tf32,
                             request.max_batch);
#else
  return absl::FailedPreconditionError(
      "this worker was built without CUDA support; device=cuda unavailable");
#endif
}

}  // namespace gradsync
