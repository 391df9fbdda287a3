// The boundary between the worker and libgradsync_torch.so, the plugin that
// holds everything that needs libtorch (worker/model/torch). The worker does
// not link libtorch: mapping it costs about a second at every start, torch
// job or not, and a worker must run MLP jobs on a machine without it. It
// opens the plugin the first time a job needs a TorchScript model or a
// tensors: data set (../plugin_loader.h).
//
// Both sides are built by the same build, with the same compiler and
// flags, so C++ types cross the boundary; kTorchPluginAbi guards against a
// plugin file left over from another version. The plugin links its own
// copies of gradsync's static libraries with their symbols hidden
// (-Wl,--exclude-libs,ALL), and no generated protobuf code, so nothing it
// holds clashes with the worker's; Abseil, spdlog and OpenBLAS are shared
// libraries that both use as one.
#ifndef GRADSYNC_WORKER_MODEL_TORCH_TORCH_PLUGIN_H_
#define GRADSYNC_WORKER_MODEL_TORCH_TORCH_PLUGIN_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/model/device_model.h"
#include "worker/model/torch/tensor_data.h"
#include "worker/model/torch/torch_model.h"

namespace gradsync {

// Bumped whenever TorchPluginApi or a type it names changes.
inline constexpr int kTorchPluginAbi = 2;

// What the plugin offers; every pointer is set. The functions are those of
// torch_model.h and tensor_data.h, with the same contracts and errors.
struct TorchPluginApi {
  int abi = 0;  // kTorchPluginAbi of its build; first: plugin_loader.h reads it
  absl::StatusOr<std::unique_ptr<DeviceModel>> (*make_model)(
      const TorchModelOptions& options) = nullptr;
  absl::StatusOr<TensorData> (*load_data)(const std::string& path) = nullptr;
};

}  // namespace gradsync

// The one symbol the plugin exports; never null.
extern "C" const gradsync::TorchPluginApi* GradsyncTorchPluginApi();
inline constexpr char kTorchPluginEntry[] = "GradsyncTorchPluginApi";
inline constexpr char kTorchPluginFile[] = "libgradsync_torch.so";

#endif  // GRADSYNC_WORKER_MODEL_TORCH_TORCH_PLUGIN_H_
