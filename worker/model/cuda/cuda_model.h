// DeviceModel on a CUDA GPU (CudaMlp + per-bucket events, a copy stream for
// gradient buckets, per-bucket device optimizers).
#ifndef GRADSYNC_WORKER_MODEL_CUDA_CUDA_MODEL_H_
#define GRADSYNC_WORKER_MODEL_CUDA_CUDA_MODEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/model/device_model.h"
#include "worker/model/mlp.h"

namespace gradsync {
namespace cuda {

// FAILED_PRECONDITION when `device` does not exist.
absl::StatusOr<std::unique_ptr<DeviceModel>> MakeCudaModel(const MlpSpec& spec,
                                                           int device,
                                                           bool allow_tf32,
                                                           int max_batch);

}  // namespace cuda
}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_CUDA_CUDA_MODEL_H_
