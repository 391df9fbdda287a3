#include "worker/model/plugin_loader.h"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gradsync {
namespace {

// dlopens `path` and checks its entry point and ABI.
absl::StatusOr<const void*> OpenFile(const PluginInfo& info, const std::string& path) {
  // RTLD_LOCAL: the plugin's libraries stay out of the global scope;
  // RTLD_NOW: a missing symbol fails here, not in the middle of a job.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = ::dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        info.needs, ", and this worker could not load it: ", err != nullptr ? err : path,
        " (", info.install, ")"));
  }
  using Entry = const void* (*)();
  auto entry = reinterpret_cast<Entry>(::dlsym(handle, info.entry));
  const void* api = entry != nullptr ? entry() : nullptr;
  const int abi = api != nullptr ? *static_cast<const int*>(api) : 0;
  if (abi != info.abi) {
    ::dlclose(handle);
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is not this build's plugin (entry point ", info.entry, ", ABI ", abi,
        " != ", info.abi, "): install gradsync-worker and ", info.file, " of one build"));
  }
  return api;  // the handle stays open for the life of the process
}

}  // namespace

void PluginLoader::SetPath(std::string path) {
  absl::MutexLock lock(&mu_);
  path_ = std::move(path);
}

std::vector<std::string> PluginLoader::Candidates() const {
  {
    absl::MutexLock lock(&mu_);
    if (!path_.empty()) return {path_};
  }
  std::vector<std::string> out;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path() / info_.file).string());
    out.push_back((exe.parent_path() / ".." / "lib" / "gradsync" / info_.file)
                      .lexically_normal()
                      .string());
  }
  if (info_.build_path[0] != '\0') out.push_back(info_.build_path);
  return out;
}

absl::StatusOr<const void*> PluginLoader::Open() {
  {
    absl::MutexLock lock(&mu_);
    if (api_ != nullptr) return api_;
  }
  const std::vector<std::string> candidates = Candidates();
  for (const std::string& path : candidates) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) continue;
    absl::StatusOr<const void*> api = OpenFile(info_, path);
    if (!api.ok()) return api.status();
    absl::MutexLock lock(&mu_);
    if (api_ == nullptr) api_ = *api;
    return api_;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      info_.needs, " through ", info_.file,
      ", which this worker did not find (looked at: ", absl::StrJoin(candidates, ", "),
      "); install it beside gradsync-worker"));
}

}  // namespace gradsync
