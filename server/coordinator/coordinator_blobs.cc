// Coordinator.PutBlob and GetBlob: files that travel with jobs (TorchScript
// models), kept by content hash in options.blobs (common/content_store.h).
#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/spec/model_spec.h"
#include "server/coordinator/coordinator.h"
#include "spdlog/spdlog.h"

namespace gradsync {
namespace {

grpc::Status NoBlobs() {
  return grpc::Status(grpc::FAILED_PRECONDITION, "this coordinator keeps no blobs");
}

}  // namespace

grpc::Status Coordinator::PutBlobUnguarded(grpc::ServerContext* ctx,
                                           grpc::ServerReader<v1::BlobChunk>* reader,
                                           v1::BlobInfo* resp) {
  if (options_.blobs == nullptr) return NoBlobs();
  // Room on the server, beside the per-file limits: what the quota of all
  // blobs leaves, and what the disk has beyond its reserve. Uploads in
  // progress count as stored (their temporaries); two that start at once
  // may each take the room one had (at most --max_blob_streams files).
  absl::StatusOr<ContentStore::Usage> usage = options_.blobs->Measure();
  if (!usage.ok()) return ToGrpcStatus(usage.status());
  const uint64_t quota_room = options_.max_blobs_total_bytes > usage->stored
                                  ? options_.max_blobs_total_bytes - usage->stored
                                  : 0;
  const uint64_t disk_room = usage->available > options_.blob_disk_reserve_bytes
                                 ? usage->available - options_.blob_disk_reserve_bytes
                                 : 0;
  const auto room_error = [&](uint64_t bytes) {
    const bool quota = quota_room <= disk_room;
    return grpc::Status(
        grpc::RESOURCE_EXHAUSTED,
        quota ? absl::StrCat("PutBlob: ", bytes, " bytes more would pass this server's ",
                             options_.max_blobs_total_bytes,
                             " bytes for all uploaded files (--max_blobs_total_bytes; ",
                             usage->stored, " kept in ", options_.blobs->dir(),
                             ": remove unused ones by hand)")
              : absl::StrCat("PutBlob: ", bytes, " bytes more would leave less than ",
                             options_.blob_disk_reserve_bytes,
                             " bytes free on the disk of ", options_.blobs->dir(),
                             " (--blob_disk_reserve_bytes; ", usage->available,
                             " free), which the job history needs"));
  };
  const uint64_t room = std::min(quota_room, disk_room);
  absl::StatusOr<std::unique_ptr<ContentStore::Writer>> w =
      options_.blobs->NewWriter(std::min(options_.max_blob_bytes, room));
  if (!w.ok()) return ToGrpcStatus(w.status());
  uint64_t max = options_.max_blob_bytes;
  const char* flag = "--max_blob_bytes";
  v1::BlobChunk chunk;
  std::string want;
  std::optional<uint64_t> size;
  bool first = true;
  while (reader->Read(&chunk)) {
    UploadActive(ctx);
    if (first) {
      first = false;
      if (chunk.kind() == "data") {
        max = options_.max_data_bytes;
        flag = "--max_data_bytes";
        (*w)->set_max_bytes(std::min(max, room));
      }
      if (!chunk.sha256().empty()) {
        if (!IsSha256Hex(chunk.sha256())) {
          return grpc::Status(grpc::INVALID_ARGUMENT,
                              "PutBlob: sha256 is not 64 lowercase hex digits");
        }
        want = chunk.sha256();
        size = chunk.size();
      }
      if (size.has_value() && *size > max) {
        return grpc::Status(grpc::RESOURCE_EXHAUSTED,
                            absl::StrCat("PutBlob: a file of ", *size,
                                         " bytes is over this server's limit of ", max,
                                         " bytes (", flag, ")"));
      }
      if (size.has_value() && *size > room) return room_error(*size);
    }
    if (absl::Status st = (*w)->Append(chunk.data()); !st.ok()) {
      if (st.code() == absl::StatusCode::kResourceExhausted && room < max) {
        return room_error((*w)->size() + chunk.data().size());
      }
      return ToGrpcStatus(absl::Status(
          st.code(), absl::StrCat("PutBlob: ", st.message(), " (", flag, ")")));
    }
  }
  if (ctx->IsCancelled()) return grpc::Status(grpc::CANCELLED, "PutBlob: cancelled");
  absl::StatusOr<ContentInfo> info = (*w)->Commit(want, size);
  if (!info.ok()) {
    return ToGrpcStatus(absl::Status(info.status().code(),
                                     absl::StrCat("PutBlob: ", info.status().message())));
  }
  spdlog::info("blob {} stored ({} bytes)", info->sha256, info->size);
  resp->set_sha256(info->sha256);
  resp->set_size(info->size);
  return grpc::Status::OK;
}

grpc::Status Coordinator::GetBlobUnguarded(grpc::ServerContext* ctx,
                                           const v1::GetBlobRequest* req,
                                           grpc::ServerWriter<v1::BlobChunk>* writer) {
  if (options_.blobs == nullptr) return NoBlobs();
  absl::StatusOr<std::string> path = options_.blobs->Find(req->sha256());
  if (!path.ok()) return ToGrpcStatus(path.status());
  absl::StatusOr<std::unique_ptr<SequentialFile>> in = env_->NewSequentialFile(*path);
  if (!in.ok()) {
    return grpc::Status(grpc::INTERNAL, std::string(in.status().message()));
  }
  const uint64_t size = (*in)->size();
  std::vector<char> buf(kBlobChunkBytes);
  uint64_t sent = 0;
  bool first = true;
  while (first || sent < size) {
    const uint64_t n = std::min<uint64_t>(buf.size(), size - sent);
    uint64_t got = 0;
    while (got < n) {
      absl::StatusOr<size_t> r = (*in)->Read(buf.data() + got, n - got);
      if (!r.ok() || *r == 0) break;
      got += *r;
    }
    if (got != n) {
      return grpc::Status(grpc::DATA_LOSS, absl::StrCat("short read of ", *path));
    }
    v1::BlobChunk chunk;
    chunk.set_data(buf.data(), n);
    if (first) {
      chunk.set_sha256(req->sha256());
      chunk.set_size(size);
      first = false;
    }
    if (ctx->IsCancelled() || !writer->Write(chunk)) {
      return grpc::Status(grpc::CANCELLED, "GetBlob: the reader went away");
    }
    sent += n;
  }
  return grpc::Status::OK;
}

grpc::Status Coordinator::CheckUploaded(const v1::JobSpec& spec) const {
  struct Named {
    const char* field;
    const std::string& text;
    absl::StatusOr<std::string> hash;
    const char* flag;
  };
  const Named named[] = {
      {"model", spec.model(),
       IsTorchScriptModel(spec.model()) ? TorchScriptHashOf(spec.model())
                                        : absl::NotFoundError(""),
       "--model=torchscript:PATH"},
      {"dataset", spec.dataset(),
       IsTensorData(spec.dataset()) ? TensorDataHashOf(spec.dataset())
                                    : absl::NotFoundError(""),
       "--data=tensors:PATH"},
  };
  for (const Named& n : named) {
    if (!n.hash.ok()) continue;  // not a blob, or ValidateJobSpec says why
    if (options_.blobs != nullptr && options_.blobs->Find(*n.hash).ok()) continue;
    return grpc::Status(grpc::FAILED_PRECONDITION,
                        absl::StrCat(n.field, ": ", n.text,
                                     " was never uploaded to this coordinator (gradsync "
                                     "submit ",
                                     n.flag, " uploads the file)"));
  }
  return grpc::Status::OK;
}

}  // namespace gradsync
