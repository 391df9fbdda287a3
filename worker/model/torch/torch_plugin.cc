// libgradsync_torch.so's entry point (torch_plugin.h).
#include "worker/model/torch/torch_plugin.h"

extern "C" __attribute__((visibility("default"))) const gradsync::TorchPluginApi*
GradsyncTorchPluginApi() {
  static const gradsync::TorchPluginApi api = [] {
    gradsync::TorchPluginApi a;
    a.abi = gradsync::kTorchPluginAbi;
    a.make_model = &gradsync::MakeTorchScriptModel;
    a.load_data = &gradsync::LoadTensorData;
    return a;
  }();
  return &api;
}
