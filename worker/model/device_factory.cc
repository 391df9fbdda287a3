#include "worker/model/device_factory.h"

#include <unistd.h>

#include <utility>

#include "absl/status/status.h"
#include "worker/model/cpu_threads.h"
#include "worker/model/cuda/cuda_plugin.h"
#include "worker/model/plugin_loader.h"
#include "worker/model/torch/torch_plugin.h"

namespace gradsync {
namespace {

#ifndef GRADSYNC_TORCH_PLUGIN_BUILD_PATH
#define GRADSYNC_TORCH_PLUGIN_BUILD_PATH ""
#endif
#ifndef GRADSYNC_CUDA_PLUGIN_BUILD_PATH
#define GRADSYNC_CUDA_PLUGIN_BUILD_PATH ""
#endif

PluginLoader& TorchLoader() {
  static PluginLoader* loader = new PluginLoader(PluginInfo{
      kTorchPluginFile, kTorchPluginEntry, kTorchPluginAbi,
      "TorchScript models and tensors: data need libtorch",
      "install Debian's libtorch1.13, or libtorch-dev, on this worker's machine",
      GRADSYNC_TORCH_PLUGIN_BUILD_PATH});
  return *loader;
}

PluginLoader& CudaLoader() {
  static PluginLoader* loader = new PluginLoader(PluginInfo{
      kCudaPluginFile, kCudaPluginEntry, kCudaPluginAbi,
      "device=cuda needs the CUDA runtime and cuBLAS",
      "install the CUDA toolkit's libcudart and libcublas, or run with device=cpu",
      GRADSYNC_CUDA_PLUGIN_BUILD_PATH});
  return *loader;
}

absl::StatusOr<const TorchPluginApi*> Torch() {
#ifndef GRADSYNC_HAVE_TORCH
  return absl::FailedPreconditionError(
      "this worker was built without libtorch, so it cannot train TorchScript models "
      "or read tensors: data sets (install libtorch-dev and build with "
      "-DGRADSYNC_TORCH=ON)");
#else
  absl::StatusOr<const void*> api = TorchLoader().Open();
  if (!api.ok()) return api.status();
  return static_cast<const TorchPluginApi*>(*api);
#endif
}

absl::StatusOr<const CudaPluginApi*> Cuda() {
#ifndef GRADSYNC_HAVE_CUDA
  return absl::FailedPreconditionError(
      "this worker was built without CUDA support; device=cuda unavailable");
#else
  absl::StatusOr<const void*> api = CudaLoader().Open();
  if (!api.ok()) return api.status();
  return static_cast<const CudaPluginApi*>(*api);
#endif
}

absl::StatusOr<std::unique_ptr<DeviceModel>> MakeTorchScript(
    const DeviceRequest& request) {
  if (request.cuda) {
    return absl::FailedPreconditionError(
        "TorchScript models train on the CPU in this build (Debian's libtorch has no "
        "CUDA); use device=cpu");
  }
  absl::StatusOr<const TorchPluginApi*> torch = Torch();
  if (!torch.ok()) return torch.status();
  // libtorch's GEMMs go to the same OpenBLAS as the MLP's: size its pool
  // per rank too, or each rank's BLAS threads fight the others'.
  SetBlasThreads(request.cpu_threads);
  TorchModelOptions o;
  o.path = request.torchscript_path;
  o.features = request.features;
  o.classes = request.classes;
  o.threads = request.cpu_threads;
  o.max_memory_bytes = request.max_job_memory;
  return (*torch)->make_model(o);
}

}  // namespace

void SetTorchPluginPath(std::string path) { TorchLoader().SetPath(std::move(path)); }
void SetCudaPluginPath(std::string path) { CudaLoader().SetPath(std::move(path)); }

absl::Status TorchScriptAvailable() { return Torch().status(); }
absl::Status CudaAvailable() { return Cuda().status(); }

absl::StatusOr<TrainTestData> LoadTensorDataFile(const std::string& path) {
  absl::StatusOr<const TorchPluginApi*> torch = Torch();
  if (!torch.ok()) return torch.status();
  absl::StatusOr<TensorData> d = (*torch)->load_data(path);
  if (!d.ok()) return d.status();
  return TrainTestData{std::move(d->train), std::move(d->test)};
}

bool NvidiaDriverPresent() {
  return ::access("/proc/driver/nvidia/version", F_OK) == 0 ||
         ::access("/dev/nvidiactl", F_OK) == 0;
}

int VisibleGpuCount() {
#ifndef GRADSYNC_HAVE_CUDA
  return 0;
#else
  // Without a driver there is no GPU to count: the plugin (and cuBLAS) stay
  // unmapped.
  if (!NvidiaDriverPresent()) return 0;
  absl::StatusOr<const CudaPluginApi*> cuda = Cuda();
  return cuda.ok() ? (*cuda)->device_count() : 0;
#endif
}

absl::StatusOr<std::unique_ptr<DeviceModel>> MakeDeviceModel(
    const DeviceRequest& request) {
  if (request.source == ModelSource::kTorchScript) return MakeTorchScript(request);
  if (!request.cuda) {
    SetBlasThreads(request.cpu_threads);
    return MakeCpuModel(request.model);
  }
  absl::StatusOr<const CudaPluginApi*> cuda = Cuda();
  if (!cuda.ok()) return cuda.status();
  return (*cuda)->make_model(request.model, request.gpu, request.allow_tf32,
                             request.max_batch);
}

}  // namespace gradsync
