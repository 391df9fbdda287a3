#include "common/spec/model_spec.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace gradsync {
namespace {

constexpr char kPrefix[] = "mlp:";
constexpr int kMaxWidth = kMaxModelWidth;

}  // namespace

std::string MlpSpec::ToString() const {
  return absl::StrCat(kPrefix, absl::StrJoin(widths, "-"));
}

absl::StatusOr<MlpSpec> ParseModelSpec(const std::string& text) {
  const std::string prefix = kPrefix;
  if (text.compare(0, prefix.size(), prefix) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("model: unknown model \"", text,
                                                   "\" (want e.g. mlp:784-256-128-10)"));
  }
  MlpSpec spec;
  for (absl::string_view piece :
       absl::StrSplit(absl::string_view(text).substr(prefix.size()), '-')) {
    // Strict digits only: absl::SimpleAtoi would accept signs and spaces.
    const bool digits = !piece.empty() && piece.size() <= 8 &&
                        std::all_of(piece.begin(), piece.end(),
                                    [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      return absl::InvalidArgumentError(
          absl::StrCat("model: width \"", piece, "\" in \"", text, "\" is not a number"));
    }
    int w = 0;
    for (char c : piece) w = w * 10 + (c - '0');
    if (w < 1 || w > kMaxWidth) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model: width ", w, " in \"", text, "\" is outside [1, ", kMaxWidth, "]"));
    }
    spec.widths.push_back(w);
  }
  if (spec.widths.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model: \"", text, "\" needs at least an input and an output width"));
  }
  return spec;
}

size_t NumParams(const MlpSpec& spec) {
  size_t total = 0;
  for (size_t l = 0; l + 1 < spec.widths.size(); ++l) {
    const size_t in = static_cast<size_t>(spec.widths[l]);
    const size_t out = static_cast<size_t>(spec.widths[l + 1]);
    total += out * in + out;
  }
  return total;
}

bool IsTorchScriptModel(const std::string& text) {
  return absl::StartsWith(text, kTorchScriptPrefix);
}

bool IsSha256Hex(const std::string& text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

namespace {

// The hash of "<prefix>sha256:<hex>", or INVALID_ARGUMENT naming `field`.
absl::StatusOr<std::string> UploadedHashOf(const std::string& text,
                                           const std::string& hash_prefix,
                                           const std::string& field,
                                           const std::string& what,
                                           const std::string& user_form) {
  if (!absl::StartsWith(text, hash_prefix) ||
      !IsSha256Hex(text.substr(hash_prefix.size()))) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": \"", text.substr(0, 200), "\" is not an uploaded ", what,
        "; the server takes ", hash_prefix,
        "<64 hex digits>, which gradsync submit and local send after uploading ",
        user_form));
  }
  return text.substr(hash_prefix.size());
}

}  // namespace

absl::StatusOr<std::string> TorchScriptHashOf(const std::string& text) {
  return UploadedHashOf(text, kTorchScriptHashPrefix, "model", "TorchScript model",
                        "torchscript:PATH");
}

bool IsTensorData(const std::string& text) {
  return absl::StartsWith(text, kTensorsPrefix);
}

absl::StatusOr<std::string> TensorDataHashOf(const std::string& text) {
  return UploadedHashOf(text, kTensorsHashPrefix, "dataset", "tensor data file",
                        "tensors:PATH");
}

std::string TensorDataOf(const std::string& sha256_hex) {
  return absl::StrCat(kTensorsHashPrefix, sha256_hex);
}

bool IsWorkerTensorData(const std::string& text) {
  return absl::StartsWith(text, kWorkerTensorsPrefix);
}

absl::StatusOr<WorkerTensorData> WorkerTensorDataOf(const std::string& text) {
  const std::string prefix = kWorkerTensorsHashPrefix;
  constexpr size_t kHex = 64;
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset: \"", text.substr(0, 300), "\" ", why,
        "; the server takes tensors-on-workers:sha256:<64 hex digits>:/ABSOLUTE/PATH, "
        "which gradsync submit writes for --data=tensors-on-workers:PATH when it can "
        "read PATH (else name the file's sha256sum in that form yourself)"));
  };
  if (!absl::StartsWith(text, prefix)) return bad("has no sha256");
  if (text.size() < prefix.size() + kHex + 1 ||
      !IsSha256Hex(text.substr(prefix.size(), kHex)) ||
      text[prefix.size() + kHex] != ':') {
    return bad("has no 64 lowercase hex digits and ':' after sha256:");
  }
  WorkerTensorData d;
  d.sha256 = text.substr(prefix.size(), kHex);
  d.path = text.substr(prefix.size() + kHex + 1);
  if (d.path.empty() || d.path[0] != '/') {
    return bad(
        "names no absolute path (each worker reads it from its own cwd otherwise)");
  }
  if (d.path.size() > 4096 || d.path.find('\0') != std::string::npos) {
    return bad("names a path longer than 4096 bytes or with a NUL byte");
  }
  return d;
}

std::string WorkerTensorDataSpec(const WorkerTensorData& d) {
  return absl::StrCat(kWorkerTensorsHashPrefix, d.sha256, ":", d.path);
}

std::string TorchScriptModelOf(const std::string& sha256_hex) {
  return absl::StrCat(kTorchScriptHashPrefix, sha256_hex);
}

}  // namespace gradsync
