// Uploaded TorchScript models and tensor data files are read by libtorch,
// which does not bound what a corrupted file makes it allocate (one 2 KB
// mutated torch.save file asked for 24 GB, and the kernel's OOM killer
// killed the process). So a worker first reads each such file in a helper
// process, itself run with --check_torch_file, under an address-space
// limit: a file that makes the helper run out of memory, crash or hang
// fails the job with that reason, and the worker stays up.
#ifndef GRADSYNC_WORKER_TORCH_FILE_CHECK_H_
#define GRADSYNC_WORKER_TORCH_FILE_CHECK_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/env.h"

namespace gradsync {

// What the helper reads: "data:PATH" (a tensors: data set) or
// "model:FEATURES:CLASSES:PATH" (a TorchScript model for such data).
struct TorchFileCheck {
  std::string helper;  // the worker binary (run as `helper --check_torch_file=ARG`)
  std::string arg;
  std::string torch_plugin;        // set: passed on as --torch_plugin
  uint64_t max_address_space = 0;  // the helper's RLIMIT_AS; 0: 4 GiB + 8x the file
  absl::Duration timeout = absl::Minutes(2);
  const Env* env = Env::Default();  // the deadline's clock
};

// Runs the helper and waits for it. OK when it read the file;
// INVALID_ARGUMENT with the helper's own error when it refused it;
// RESOURCE_EXHAUSTED when it ran out of its address space or was killed;
// DEADLINE_EXCEEDED (the helper killed) past the timeout.
absl::Status CheckTorchFileInHelper(const TorchFileCheck& check);

// The helper's side (worker/main.cc, --check_torch_file): reads what `arg`
// names and returns what the worker's loader would.
absl::Status CheckTorchFile(const std::string& arg);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_TORCH_FILE_CHECK_H_
