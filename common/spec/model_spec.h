// common/spec: what a job asks for, parsed once and shared by server, worker
// and client: model specs (this file) and job-spec validation (job_spec.h).
#ifndef GRADSYNC_COMMON_SPEC_MODEL_SPEC_H_
#define GRADSYNC_COMMON_SPEC_MODEL_SPEC_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gradsync {

// The shape of Fashion-MNIST, the one dataset jobs train on.
inline constexpr int kFashionMnistFeatures = 784;
inline constexpr int kFashionMnistClasses = 10;
inline constexpr char kDefaultModel[] = "mlp:784-256-128-10";
// Widest layer a model spec may ask for.
inline constexpr int kMaxModelWidth = 1 << 20;

// Layer widths of a multilayer perceptron: input, hidden..., output.
struct MlpSpec {
  std::vector<int> widths;       // e.g. {784, 256, 128, 10}; at least 2 entries
  std::string ToString() const;  // "mlp:784-256-128-10"
};

// Parses "mlp:784-256-128-10". INVALID_ARGUMENT (naming "model") for an unknown
// prefix, fewer than two widths, a width < 1 or > 1<<20, or non-numbers.
absl::StatusOr<MlpSpec> ParseModelSpec(const std::string& text);

// Number of parameters of the spec (weights + biases).
size_t NumParams(const MlpSpec& spec);

// TorchScript models (docs/user-guide.md "Your own model"). A user names a
// file, "torchscript:PATH"; the client uploads it (Coordinator.PutBlob) and
// the job carries its content hash, "torchscript:sha256:<64 lowercase hex>",
// by which each worker fetches it.
inline constexpr char kTorchScriptPrefix[] = "torchscript:";
inline constexpr char kTorchScriptHashPrefix[] = "torchscript:sha256:";

// True for any "torchscript:..." text (a path or a hash).
bool IsTorchScriptModel(const std::string& text);
// The hash in "torchscript:sha256:<hex>". INVALID_ARGUMENT naming "model"
// when `text` is not that form (e.g. a path the client did not upload).
absl::StatusOr<std::string> TorchScriptHashOf(const std::string& text);
// "torchscript:sha256:<sha256_hex>".
std::string TorchScriptModelOf(const std::string& sha256_hex);
// True for 64 lowercase hex digits.
bool IsSha256Hex(const std::string& text);

// Data sets of your own tensors (worker/model/torch/tensor_data.h), named
// and uploaded like TorchScript models: "tensors:PATH" on the client,
// "tensors:sha256:<hex>" on the wire (JobSpec.dataset).
inline constexpr char kTensorsPrefix[] = "tensors:";
inline constexpr char kTensorsHashPrefix[] = "tensors:sha256:";
bool IsTensorData(const std::string& text);
// The hash in "tensors:sha256:<hex>"; INVALID_ARGUMENT naming "dataset"
// otherwise.
absl::StatusOr<std::string> TensorDataHashOf(const std::string& text);
std::string TensorDataOf(const std::string& sha256_hex);

// Data sets too big to send: the same file at the same absolute path on every
// worker. "tensors-on-workers:PATH" on the client, which hashes PATH when it
// can read it; "tensors-on-workers:sha256:<hex>:PATH" on the wire (and what a
// user writes when the client cannot read PATH). Each worker hashes its own
// file and refuses the job when it differs, so no rank trains on other data.
inline constexpr char kWorkerTensorsPrefix[] = "tensors-on-workers:";
inline constexpr char kWorkerTensorsHashPrefix[] = "tensors-on-workers:sha256:";
struct WorkerTensorData {
  std::string sha256;  // 64 lowercase hex digits
  std::string path;    // absolute, on every worker
};
bool IsWorkerTensorData(const std::string& text);
// Parses the wire form; INVALID_ARGUMENT naming "dataset" for anything else,
// a bad hash or a relative path.
absl::StatusOr<WorkerTensorData> WorkerTensorDataOf(const std::string& text);
std::string WorkerTensorDataSpec(const WorkerTensorData& d);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_SPEC_MODEL_SPEC_H_
