// worker/model/torch: user models as TorchScript files, trained through the
// same DeviceModel interface as the built-in MLP (built with
// -DGRADSYNC_TORCH=ON|AUTO and Debian's libtorch-dev). This header names no
// libtorch type, so only torch_model.cc pays for libtorch's headers.
//
// The contract a module meets (docs/user-guide.md "Your own model"):
//  - forward(x): x is float32 [batch, features] (one data-set sample per
//    row, flattened; the module reshapes it); it returns class logits
//    [batch, classes >= the data set's classes];
//  - the loss is the mean cross-entropy of those logits, unless the module
//    has a method loss(x, y) (y int64 [batch]) returning a scalar;
//  - every parameter is float32. The order of module.parameters() (the
//    order of registration, depth first) fixes the flat layout that buckets
//    and PS partitions cut: each parameter is one "layer" for bucketing;
//  - buffers (batch-norm running statistics) are kept per rank, not
//    synchronised: they steer evaluation only, and averaging them every step
//    would cost a second collective for little (DDP broadcasts rank 0's
//    instead; docs/user-guide.md says so).
#ifndef GRADSYNC_WORKER_MODEL_TORCH_TORCH_MODEL_H_
#define GRADSYNC_WORKER_MODEL_TORCH_TORCH_MODEL_H_

#include <cstdint>
#include <exception>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/model/device_model.h"

namespace gradsync {

struct TorchModelOptions {
  std::string path;  // the TorchScript file (torch.jit.save)
  int features = 0;  // floats per sample of the data set
  int classes = 0;   // labels lie in [0, classes)
  int threads = 0;   // libtorch intra-op threads; <= 0: leave as is
  // Bytes the job's libtorch tensors may take beyond those held when the
  // model is made (memory_budget.h); an allocation past it fails as out of
  // memory (RESOURCE_EXHAUSTED). <= 0: no limit.
  int64_t max_memory_bytes = 0;
};

// Loads the module, lays its parameters out flat, and checks it against the
// contract with a forward and backward on one sample of zeros. Errors name
// the file and the cause: INVALID_ARGUMENT for a file that is not
// TorchScript, a module without forward or without parameters, a parameter
// that is not float32, or an output that does not fit the labels;
// NOT_FOUND for a missing file.
absl::StatusOr<std::unique_ptr<DeviceModel>> MakeTorchScriptModel(
    const TorchModelOptions& options);

// What a libtorch error says, in one line: its first line, or for an error
// of the TorchScript interpreter ("The following operation failed in the
// TorchScript interpreter. Traceback ...") the line that names what failed
// ("RuntimeError: shape '[-1, 900]' is invalid for input of size 40") and
// the innermost frame of the module's code ("File ..., line 6, in forward").
std::string TorchErrorText(absl::string_view what);
// `context: TorchErrorText(e)`, RESOURCE_EXHAUSTED when the error is an
// allocation that failed (std::bad_alloc, libtorch's "can't allocate
// memory", CUDA's "out of memory"), else INVALID_ARGUMENT.
absl::Status TorchError(absl::string_view context, const std::exception& e);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_TORCH_TORCH_MODEL_H_
