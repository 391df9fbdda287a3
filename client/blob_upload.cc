#include "client/blob_upload.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/content_store.h"
#include "common/spec/model_spec.h"

namespace gradsync {
namespace {

// Files uploaded by this process: path -> hash.
absl::Mutex uploaded_mu;
std::map<std::string, std::string>& Uploaded()
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(uploaded_mu) {
  static auto* m = new std::map<std::string, std::string>();
  return *m;
}

// `kind`: "model" or "data" (BlobChunk.kind; it also names the flag).
absl::StatusOr<std::string> Upload(v1::Coordinator::Stub* stub, const std::string& path,
                                   const std::string& kind) {
  const std::string field = kind == "data" ? "data" : "model";
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(field, ": cannot read ", path,
                     kind == "data" ? " (--data=tensors:PATH names a file written by "
                                      "torch.save({\"x\": ..., \"y\": ...}, PATH))"
                                    : " (--model=torchscript:PATH names a file written "
                                      "by torch.jit.save)"));
  }
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  absl::StatusOr<std::string> sha = Sha256OfFile(path);
  if (!sha.ok()) return sha.status();
  grpc::ClientContext ctx;
  // A minute, and a second more per 10 MB.
  ctx.set_deadline(absl::ToChronoTime(
      absl::Now() + absl::Seconds(60 + static_cast<double>(size) / 10e6)));
  v1::BlobInfo info;
  std::unique_ptr<grpc::ClientWriter<v1::BlobChunk>> writer = stub->PutBlob(&ctx, &info);
  std::vector<char> buf(kBlobChunkBytes);
  uint64_t sent = 0;
  bool first = true;
  while (first || sent < size) {
    const uint64_t n = std::min<uint64_t>(buf.size(), size - sent);
    in.read(buf.data(), static_cast<std::streamsize>(n));
    if (static_cast<uint64_t>(in.gcount()) != n) {
      ctx.TryCancel();
      writer->Finish();
      return absl::DataLossError(
          absl::StrCat(field, ": ", path, " changed while uploading"));
    }
    v1::BlobChunk chunk;
    chunk.set_data(buf.data(), n);
    if (first) {
      chunk.set_sha256(*sha);
      chunk.set_size(size);
      chunk.set_kind(kind);
      first = false;
    }
    if (!writer->Write(chunk)) break;  // the server ended the call: Finish says why
    sent += n;
  }
  writer->WritesDone();
  const grpc::Status st = writer->Finish();
  if (!st.ok()) {
    return absl::Status(
        static_cast<absl::StatusCode>(st.error_code()),
        absl::StrCat(field, ": uploading ", path, ": ", st.error_message()));
  }
  if (info.sha256() != *sha) {
    return absl::DataLossError(absl::StrCat(field, ": the server stored ", path, " as ",
                                            info.sha256(), ", not ", *sha));
  }
  return *sha;
}

}  // namespace

namespace {

// Uploads the file `text` names after `prefix` (unless done before) and
// returns its hash.
absl::StatusOr<std::string> UploadOnce(v1::Coordinator::Stub* stub,
                                       const std::string& text, const char* prefix,
                                       const char* kind) {
  const std::string path = text.substr(std::string(prefix).size());
  const std::string key = absl::StrCat(kind, ":", path);
  {
    absl::MutexLock lock(&uploaded_mu);
    auto it = Uploaded().find(key);
    if (it != Uploaded().end()) return it->second;
  }
  absl::StatusOr<std::string> sha = Upload(stub, path, kind);
  if (!sha.ok()) return sha.status();
  absl::MutexLock lock(&uploaded_mu);
  Uploaded()[key] = *sha;
  return *sha;
}

// "tensors-on-workers:PATH" -> "tensors-on-workers:sha256:<hex>:/ABS/PATH",
// hashing this host's copy of the file (the workers check theirs against it).
absl::Status NameWorkerData(v1::JobSpec* spec) {
  std::error_code ec;
  const std::string given = spec->dataset().substr(std::strlen(kWorkerTensorsPrefix));
  const std::string path =
      given.empty() ? given
                    : std::filesystem::absolute(given, ec).lexically_normal().string();
  absl::StatusOr<std::string> sha = Sha256OfFile(path);
  if (ec || !sha.ok()) {
    return absl::NotFoundError(absl::StrCat(
        "data: cannot read ", given.empty() ? "(no path)" : path, " here to hash it (",
        ec ? ec.message() : sha.status().message(),
        "); --data=tensors-on-workers:PATH names a file at the same absolute path "
        "on every worker. If only the workers hold it, name its hash yourself: "
        "--data=tensors-on-workers:sha256:<sha256sum of the file>:/ABSOLUTE/PATH"));
  }
  spec->set_dataset(WorkerTensorDataSpec({*sha, path}));
  return absl::OkStatus();
}

}  // namespace

absl::Status UploadJobFiles(v1::Coordinator::Stub* stub, v1::JobSpec* spec) {
  if (IsTorchScriptModel(spec->model()) && !TorchScriptHashOf(spec->model()).ok()) {
    absl::StatusOr<std::string> sha =
        UploadOnce(stub, spec->model(), kTorchScriptPrefix, "model");
    if (!sha.ok()) return sha.status();
    spec->set_model(TorchScriptModelOf(*sha));
  }
  if (IsTensorData(spec->dataset()) && !TensorDataHashOf(spec->dataset()).ok()) {
    absl::StatusOr<std::string> sha =
        UploadOnce(stub, spec->dataset(), kTensorsPrefix, "data");
    if (!sha.ok()) return sha.status();
    spec->set_dataset(TensorDataOf(*sha));
  }
  if (IsWorkerTensorData(spec->dataset()) &&
      !absl::StartsWith(spec->dataset(), kWorkerTensorsHashPrefix)) {
    return NameWorkerData(spec);
  }
  return absl::OkStatus();
}

}  // namespace gradsync
