// Opens the worker's device plugins on demand: libgradsync_torch.so
// (TorchScript models, libtorch: torch/torch_plugin.h) and
// libgradsync_cuda.so (the CUDA backend, cuBLAS: cuda/cuda_plugin.h).
//
// The worker links neither libtorch nor cuBLAS. Mapping them costs about a
// second and a quarter of a gigabyte at every start (measured:
// bench/micro/startup.sh), job or not, and a worker must run CPU MLP jobs on
// a machine where they are missing. Each plugin is opened the first time a
// job needs it; its file names what the dynamic loader could not find when
// it fails.
#ifndef GRADSYNC_WORKER_MODEL_PLUGIN_LOADER_H_
#define GRADSYNC_WORKER_MODEL_PLUGIN_LOADER_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace gradsync {

// What a plugin is and where a build tree keeps it.
struct PluginInfo {
  const char* file;        // e.g. "libgradsync_torch.so"
  const char* entry;       // the extern "C" function that returns its API
  int abi;                 // the API's version; the API struct starts with it
  const char* needs;       // "TorchScript models need libtorch"
  const char* install;     // what to install where it is missing
  const char* build_path;  // where this build wrote it ("" when not built)
};

// One plugin, opened at most once per process; thread-safe.
class PluginLoader {
 public:
  explicit PluginLoader(PluginInfo info) : info_(info) {}
  PluginLoader(const PluginLoader&) = delete;
  PluginLoader& operator=(const PluginLoader&) = delete;

  // The one file Open tries (a daemon flag); empty: the default places.
  // No effect once the plugin is open.
  void SetPath(std::string path);

  // Where Open looks, in order: the path set above alone; else beside the
  // executable, in ../lib/gradsync/ from it, and the build tree's file.
  std::vector<std::string> Candidates() const;

  // The API struct that the plugin's entry point returns (its first member
  // is the int ABI version, checked here). FAILED_PRECONDITION, saying what
  // to do, when no candidate exists, the dynamic loader cannot open it (the
  // message names the missing library, e.g. "libtorch_cpu.so: cannot open
  // shared object file") or the entry point or ABI is not this build's. A
  // failure is not remembered: the next call tries again.
  absl::StatusOr<const void*> Open();

 private:
  const PluginInfo info_;
  mutable absl::Mutex mu_;
  std::string path_ ABSL_GUARDED_BY(mu_);
  const void* api_ ABSL_GUARDED_BY(mu_) = nullptr;  // set once, kept open
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_PLUGIN_LOADER_H_
