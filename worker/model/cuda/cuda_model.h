// DeviceModel on a CUDA GPU (CudaMlp + per-bucket events, a copy stream for
// gradient buckets, per-bucket device optimizers). Asynchronous as
// device_model.h describes: between steps the host never waits for the
// device except to read the previous step's loss (TakeLoss) and, on the copy
// thread, a bucket's copy (WaitGradCopy).
#ifndef GRADSYNC_WORKER_MODEL_CUDA_CUDA_MODEL_H_
#define GRADSYNC_WORKER_MODEL_CUDA_CUDA_MODEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/model/device_model.h"
#include "worker/model/mlp.h"

namespace gradsync {
namespace cuda {

// A model for batches of up to max_batch rows on GPU `device`, which is
// switched to blocking synchronisation (waiting threads sleep). TF32 GEMMs
// only when allow_tf32. FAILED_PRECONDITION when `device` does not exist;
// INVALID_ARGUMENT for a bad spec or max_batch; INTERNAL (naming the CUDA
// error and what was being done) when allocation or set-up fails.
absl::StatusOr<std::unique_ptr<DeviceModel>> MakeCudaModel(const MlpSpec& spec,
                                                           int device, bool allow_tf32,
                                                           int max_batch);

}  // namespace cuda
}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_CUDA_CUDA_MODEL_H_
