// Which directories a worker reads training data from. A job's data_dir is a
// path on the worker's machine chosen by whoever submitted the job, so a
// worker reads only directories its operator allowed: its own data directory
// (--data_dir, default kDefaultFashionMnistDir) and --allowed_data_dirs, each
// with everything below it. Paths are compared after realpath(3), so `..`,
// symlinks and a shared prefix ("/data-evil" vs "/data") cannot escape.
#ifndef GRADSYNC_WORKER_MODEL_DATA_DIRS_H_
#define GRADSYNC_WORKER_MODEL_DATA_DIRS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gradsync {

// Thread-compatible; const methods may be called concurrently.
class DataDirPolicy {
 public:
  // `own`: the worker's data directory ("" = kDefaultFashionMnistDir);
  // `allowed`: further directories (empty entries are ignored).
  DataDirPolicy(std::string own, std::vector<std::string> allowed);

  // The directory to read for a job that names `job_dir` ("" = the worker's
  // own, always allowed). PERMISSION_DENIED naming `rank` and `job_dir` when
  // `job_dir` does not resolve to an allowed directory or below one (a path
  // that does not exist does not resolve). Allowed directories are resolved
  // at each call, so one created after start-up counts.
  absl::StatusOr<std::string> Resolve(const std::string& job_dir, int rank) const;

  // A data file a job names (tensors-on-workers:PATH): its realpath(3) when
  // that is in an allowed directory or below one, so that the caller reads
  // the file it checked (a symlink swapped afterwards changes nothing).
  // NOT_FOUND naming `rank` when it does not resolve; PERMISSION_DENIED when
  // it resolves outside every allowed directory (a symlink to a file
  // elsewhere included).
  absl::StatusOr<std::string> ResolveFile(const std::string& path, int rank) const;

  const std::string& own() const { return own_; }

 private:
  // Constant after construction.
  const std::string own_;
  const std::vector<std::string> allowed_;  // own_ first
};

// True when `path` is `root` or below it; both already canonical (absolute,
// no `..`, no trailing '/', except root "/").
bool IsSameOrBelow(const std::string& path, const std::string& root);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_DATA_DIRS_H_
