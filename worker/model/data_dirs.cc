#include "worker/model/data_dirs.h"

#include <climits>
#include <cstdlib>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/model/dataset.h"

namespace gradsync {
namespace {

// realpath(3) of `path`; nullopt when it does not resolve.
std::optional<std::string> RealPath(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> p(realpath(path.c_str(), nullptr),
                                                &std::free);
  if (p == nullptr) return std::nullopt;
  return std::string(p.get());
}

}  // namespace

bool IsSameOrBelow(const std::string& path, const std::string& root) {
  if (root == "/") return !path.empty() && path[0] == '/';
  if (path.size() < root.size() || path.compare(0, root.size(), root) != 0) {
    return false;
  }
  return path.size() == root.size() || path[root.size()] == '/';
}

DataDirPolicy::DataDirPolicy(std::string own, std::vector<std::string> allowed)
    : own_(own.empty() ? std::string(kDefaultFashionMnistDir) : std::move(own)),
      allowed_([&] {
        std::vector<std::string> all{own_};
        for (std::string& d : allowed) {
          if (!d.empty()) all.push_back(std::move(d));
        }
        return all;
      }()) {}

absl::StatusOr<std::string> DataDirPolicy::Resolve(const std::string& job_dir,
                                                   int rank) const {
  if (job_dir.empty()) return own_;
  const std::optional<std::string> real = RealPath(job_dir);
  if (real.has_value()) {
    for (const std::string& root : allowed_) {
      const std::optional<std::string> real_root = RealPath(root);
      if (real_root.has_value() && IsSameOrBelow(*real, *real_root)) {
        return *real;
      }
    }
  }
  return absl::PermissionDeniedError(
      absl::StrCat("rank ", rank, ": data_dir ", job_dir,
                   " is not an allowed data directory on this worker (allowed: ",
                   absl::StrJoin(allowed_, ", "),
                   "; see gradsync-worker --data_dir and --allowed_data_dirs)"));
}

absl::StatusOr<std::string> DataDirPolicy::ResolveFile(const std::string& path,
                                                       int rank) const {
  const std::optional<std::string> real = RealPath(path);
  if (!real.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("rank ", rank, " cannot read ", path,
                     " (no such file, or a path it cannot reach)"));
  }
  for (const std::string& root : allowed_) {
    const std::optional<std::string> real_root = RealPath(root);
    if (real_root.has_value() && IsSameOrBelow(*real, *real_root)) return *real;
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "rank ", rank, ": ", path, " is not in an allowed data directory on this worker ",
      "(allowed: ", absl::StrJoin(allowed_, ", "),
      "; see gradsync-worker --data_dir and --allowed_data_dirs)"));
}

}  // namespace gradsync
