// The boundary between the worker and libgradsync_cuda.so, the plugin that
// holds the CUDA backend (this folder) and with it cudart and cuBLAS. The
// worker does not link them: mapping cuBLAS costs about half a second and
// 200 MiB of memory at every start (bench/startup), GPU or not. It opens the
// plugin to count GPUs only where an NVIDIA driver is installed, and
// otherwise when a job first asks for device=cuda (device_factory.cc).
//
// As with torch/torch_plugin.h: both sides come from one build, so C++ types
// cross; kCudaPluginAbi guards against a file from another version; the
// plugin holds its own hidden copies of gradsync's static libraries and no
// generated protobuf code.
#ifndef GRADSYNC_WORKER_MODEL_CUDA_CUDA_PLUGIN_H_
#define GRADSYNC_WORKER_MODEL_CUDA_CUDA_PLUGIN_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/spec/model_spec.h"
#include "worker/model/device_model.h"

namespace gradsync {

// Bumped whenever CudaPluginApi or a type it names changes.
inline constexpr int kCudaPluginAbi = 1;

// What the plugin offers; every pointer is set. The functions are
// cuda::DeviceCount (cuda_backend.h) and cuda::MakeCudaModel (cuda_model.h).
struct CudaPluginApi {
  int abi = 0;  // first: plugin_loader.h reads it
  int (*device_count)() = nullptr;
  absl::StatusOr<std::unique_ptr<DeviceModel>> (*make_model)(const MlpSpec& spec,
                                                             int device, bool allow_tf32,
                                                             int max_batch) = nullptr;
};

}  // namespace gradsync

// The one symbol the plugin exports; never null.
extern "C" const gradsync::CudaPluginApi* GradsyncCudaPluginApi();
inline constexpr char kCudaPluginEntry[] = "GradsyncCudaPluginApi";
inline constexpr char kCudaPluginFile[] = "libgradsync_cuda.so";

#endif  // GRADSYNC_WORKER_MODEL_CUDA_CUDA_PLUGIN_H_
