#include "worker/blob_fetch.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "gradsync/v1/gradsync.grpc.pb.h"
#include "spdlog/spdlog.h"

namespace gradsync {

absl::StatusOr<std::string> FetchBlob(const std::string& sha256, ContentStore* cache,
                                      const BlobFetchOptions& options) {
  absl::StatusOr<std::string> cached = cache->Find(sha256, /*verify=*/true);
  if (cached.ok()) {
    spdlog::info("blob {}: cached at {}", sha256, *cached);
    return cached;
  }
  if (cached.status().code() != absl::StatusCode::kNotFound &&
      cached.status().code() != absl::StatusCode::kDataLoss) {
    return cached.status();
  }
  const absl::Time start = options.env->Now();
  auto stub = v1::Coordinator::NewStub(MakeChannel(options.coordinator));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(start + options.timeout));
  v1::GetBlobRequest req;
  req.set_sha256(sha256);
  std::unique_ptr<grpc::ClientReader<v1::BlobChunk>> reader = stub->GetBlob(&ctx, req);
  absl::StatusOr<std::unique_ptr<ContentStore::Writer>> w =
      cache->NewWriter(std::numeric_limits<uint64_t>::max());
  if (!w.ok()) {
    ctx.TryCancel();
    reader->Finish();
    return w.status();
  }
  v1::BlobChunk chunk;
  std::optional<uint64_t> size;
  absl::Status failed;
  while (reader->Read(&chunk)) {
    if (!size.has_value()) size = chunk.size();
    if (options.cancelled != nullptr && options.cancelled->load()) {
      failed = absl::CancelledError("job cancelled while fetching its model");
      break;
    }
    if ((*w)->size() + chunk.data().size() > *size) {
      failed = absl::DataLossError(absl::StrCat("the coordinator sent more than the ",
                                                *size, " bytes it announced"));
      break;
    }
    failed = (*w)->Append(chunk.data());
    if (!failed.ok()) break;
  }
  if (!failed.ok()) ctx.TryCancel();
  const grpc::Status st = reader->Finish();
  if (!failed.ok()) return failed;
  if (!st.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                        absl::StrCat("fetching blob ", sha256, " from ",
                                     options.coordinator, ": ", st.error_message()));
  }
  absl::StatusOr<ContentInfo> info = (*w)->Commit(sha256, size);
  if (!info.ok()) {
    return absl::Status(info.status().code(), absl::StrCat("fetched blob ", sha256, ": ",
                                                           info.status().message()));
  }
  spdlog::info("blob {}: fetched {} bytes in {:.2f} s", sha256, info->size,
               absl::ToDoubleSeconds(options.env->Now() - start));
  return cache->Find(sha256);
}

}  // namespace gradsync
