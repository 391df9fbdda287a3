// The one place that knows which compute devices this build supports: the
// daemon asks it for a model replica and never names CUDA itself.
#ifndef GRADSYNC_WORKER_MODEL_DEVICE_FACTORY_H_
#define GRADSYNC_WORKER_MODEL_DEVICE_FACTORY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/spec/model_spec.h"
#include "worker/model/dataset.h"
#include "worker/model/device_model.h"

namespace gradsync {

// Which model a replica runs.
enum class ModelSource {
  kMlp,          // the built-in MLP of `DeviceRequest::model`
  kTorchScript,  // a TorchScript file (worker/model/torch), through the plugin
};

struct DeviceRequest {
  ModelSource source = ModelSource::kMlp;
  bool cuda = false;  // false: the CPU model
  MlpSpec model;      // kMlp
  int gpu = 0;        // cuda: device index
  bool allow_tf32 = false;
  int max_batch = 0;    // cuda: largest batch staged on the device
  int cpu_threads = 0;  // cpu: BLAS threads (cpu_threads.h); 0 = leave as is
  // kTorchScript: the model's file (worker/model/torch/torch_model.h), for
  // data of `features` floats per sample and labels in [0, classes).
  std::string torchscript_path;
  int features = 0;
  int classes = 0;
  // kTorchScript: bytes its tensors may take (TorchModelOptions::
  // max_memory_bytes); <= 0: no limit.
  int64_t max_job_memory = 0;
};

// The plugin files to open (the worker's --torch_plugin and --cuda_plugin);
// empty: the default places (plugin_loader.h). Call before the first job.
void SetTorchPluginPath(std::string path);
void SetCudaPluginPath(std::string path);

// OK when this worker can train TorchScript models and read tensors: data
// sets: its build has libtorch (-DGRADSYNC_TORCH) and the plugin with
// libtorch loads on this machine (plugin_loader.h; opened on the first
// call). Else FAILED_PRECONDITION saying what is missing.
absl::Status TorchScriptAvailable();

// A tensors: data set's training and test parts
// (worker/model/torch/tensor_data.h). FAILED_PRECONDITION as
// TorchScriptAvailable.
struct TrainTestData {
  Dataset train;
  Dataset test;
};
absl::StatusOr<TrainTestData> LoadTensorDataFile(const std::string& path);

// OK when this build has the CUDA backend and its plugin (with cudart and
// cuBLAS) loads here; else FAILED_PRECONDITION saying what is missing.
// Opens the plugin: call it only where a GPU is expected.
absl::Status CudaAvailable();

// Whether this machine has an NVIDIA driver (its /proc or /dev entries).
bool NvidiaDriverPresent();

// GPUs this process can use: 0 when the build has no CUDA backend, the
// machine no NVIDIA driver (then the CUDA plugin is not opened), the plugin
// does not load, or no device is visible. Never fails.
int VisibleGpuCount();

// A replica on the requested device. FAILED_PRECONDITION when this build has
// no CUDA backend or the GPU does not exist, or for a TorchScript model when
// TorchScriptAvailable is not OK or the device is a GPU.
absl::StatusOr<std::unique_ptr<DeviceModel>> MakeDeviceModel(
    const DeviceRequest& request);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_DEVICE_FACTORY_H_
