// libgradsync_cuda.so's entry point (cuda_plugin.h).
#include "worker/model/cuda/cuda_plugin.h"

#include "worker/model/cuda/cuda_backend.h"
#include "worker/model/cuda/cuda_model.h"

extern "C" __attribute__((visibility("default"))) const gradsync::CudaPluginApi*
GradsyncCudaPluginApi() {
  static const gradsync::CudaPluginApi api = [] {
    gradsync::CudaPluginApi a;
    a.abi = gradsync::kCudaPluginAbi;
    a.device_count = &gradsync::cuda::DeviceCount;
    a.make_model = &gradsync::cuda::MakeCudaModel;
    return a;
  }();
  return &api;
}
