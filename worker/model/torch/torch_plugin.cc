// libgradsync_torch.so's entry point (torch_plugin.h).
#include "worker/model/torch/torch_plugin.h"

extern "C" __attribute__((visibility("default"))) const gradsync::TorchPluginApi*
GradsyncTorchPluginApi() {
  static const gradsync::TorchPluginApi api = [] {
    gradsync::TorchPluginApi a;
    a.abi = gradsync::kTorchPluginAbi;
    a.make_model = &gradsync::MakeTorchScriptModel;
    // The plugin reads files on its own copy of the real Env.
    a.load_data = [](const std::string& path) { return gradsync::LoadTensorData(path); };
    return a;
  }();
  return &api;
}
