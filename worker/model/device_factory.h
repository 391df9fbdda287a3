// The one place that knows which compute devices this build supports: the
// daemon asks it for a model replica and never names CUDA itself.
#ifndef GRADSYNC_WORKER_MODEL_DEVICE_FACTORY_H_
#define GRADSYNC_WORKER_MODEL_DEVICE_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/spec/model_spec.h"
#include "worker/model/dataset.h"
#include "worker/model/device_model.h"

namespace gradsync {

struct DeviceRequest {
  bool cuda = false;  // false: the CPU model
  MlpSpec model;
  int gpu = 0;  // cuda: device index
  bool allow_tf32 = false;
  int max_batch = 0;    // cuda: largest batch staged on the device
  int cpu_threads = 0;  // cpu: BLAS threads (cpu_threads.h); 0 = leave as is
  // Set: a TorchScript model from this file instead of the MLP
  // (worker/model/torch/torch_model.h), for data of `features` floats per
  // sample and labels in [0, classes).
  std::string torchscript_path;
  int features = 0;
  int classes = 0;
};

// Whether this build trains TorchScript models (-DGRADSYNC_TORCH).
bool HaveTorchScript();

// A tensors: data set's training and test parts
// (worker/model/torch/tensor_data.h). FAILED_PRECONDITION naming the build
// option in a build without libtorch.
struct TrainTestData {
  Dataset train;
  Dataset test;
};
absl::StatusOr<TrainTestData> LoadTensorDataFile(const std::string& path);

// GPUs this process can use: 0 when the build has no CUDA backend or no
// device is visible. Never fails.
int VisibleGpuCount();

// A replica on the requested device. FAILED_PRECONDITION when this build has
// no CUDA backend or the GPU does not exist, or for a TorchScript model when
// it has no libtorch or the device is a GPU.
absl::StatusOr<std::unique_ptr<DeviceModel>> MakeDeviceModel(
    const DeviceRequest& request);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_DEVICE_FACTORY_H_
