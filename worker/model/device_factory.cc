#include "worker/model/device_factory.h"

#include "worker/model/cpu_threads.h"

#include "absl/status/status.h"
#ifdef GRADSYNC_HAVE_CUDA
#include "worker/model/cuda/cuda_backend.h"
#include "worker/model/cuda/cuda_model.h"
#endif
#ifdef GRADSYNC_HAVE_TORCH
#include "worker/model/torch/tensor_data.h"
#include "worker/model/torch/torch_model.h"
#endif

namespace gradsync {

bool HaveTorchScript() {
#ifdef GRADSYNC_HAVE_TORCH
  return true;
#else
  return false;
#endif
}

absl::StatusOr<TrainTestData> LoadTensorDataFile(const std::string& path) {
#ifdef GRADSYNC_HAVE_TORCH
  absl::StatusOr<TensorData> d = LoadTensorData(path);
  if (!d.ok()) return d.status();
  return TrainTestData{std::move(d->train), std::move(d->test)};
#else
  (void)path;
  return absl::FailedPreconditionError(
      "this worker was built without libtorch, so it cannot read tensors: data sets "
      "(install libtorch-dev and build with -DGRADSYNC_TORCH=ON)");
#endif
}

namespace {

absl::StatusOr<std::unique_ptr<DeviceModel>> MakeTorchScript(
    const DeviceRequest& request) {
  if (request.cuda) {
    return absl::FailedPreconditionError(
        "TorchScript models train on the CPU in this build (Debian's libtorch has no "
        "CUDA); use device=cpu");
  }
#ifdef GRADSYNC_HAVE_TORCH
  // libtorch's GEMMs go to the same OpenBLAS as the MLP's: size its pool
  // per rank too, or each rank's BLAS threads fight the others'.
  SetBlasThreads(request.cpu_threads);
  TorchModelOptions o;
  o.path = request.torchscript_path;
  o.features = request.features;
  o.classes = request.classes;
  o.threads = request.cpu_threads;
  return MakeTorchScriptModel(o);
#else
  return absl::FailedPreconditionError(
      "this worker was built without libtorch, so it cannot train TorchScript models "
      "(install libtorch-dev and build with -DGRADSYNC_TORCH=ON)");
#endif
}

}  // namespace

int VisibleGpuCount() {
#ifdef GRADSYNC_HAVE_CUDA
  return cuda::DeviceCount();
#else
  return 0;
#endif
}

absl::StatusOr<std::unique_ptr<DeviceModel>> MakeDeviceModel(
    const DeviceRequest& request) {
  if (!request.torchscript_path.empty()) return MakeTorchScript(request);
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
