// The Coordinator's RPCs as gRPC sees them: each body (coordinator.cc) runs
// under GuardRpc, so no exception escapes a handler (see coordinator.h).
#include "absl/strings/str_cat.h"
#include "common/grpc/rpc_guard.h"
#include "server/coordinator/coordinator.h"

namespace gradsync {

grpc::Status Coordinator::SubmitJob(grpc::ServerContext* ctx,
                                    const v1::SubmitJobRequest* req, v1::Job* resp) {
  return GuardRpc("SubmitJob", [&] { return SubmitJobUnguarded(ctx, req, resp); });
}

grpc::Status Coordinator::GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                                 v1::Job* resp) {
  return GuardRpc("GetJob", [&] { return GetJobUnguarded(ctx, req, resp); });
}

grpc::Status Coordinator::ListJobs(grpc::ServerContext* ctx,
                                   const v1::ListJobsRequest* req,
                                   v1::ListJobsResponse* resp) {
  return GuardRpc("ListJobs", [&] { return ListJobsUnguarded(ctx, req, resp); });
}

grpc::Status Coordinator::CancelJob(grpc::ServerContext* ctx,
                                    const v1::CancelJobRequest* req, v1::Job* resp) {
  return GuardRpc("CancelJob", [&] { return CancelJobUnguarded(ctx, req, resp); });
}

grpc::Status Coordinator::WatchJob(grpc::ServerContext* ctx,
                                   const v1::WatchJobRequest* req,
                                   grpc::ServerWriter<v1::JobEvent>* writer) {
  if (grpc::Status st = AcquireStream("WatchJob"); !st.ok()) return st;
  grpc::Status st =
      GuardRpc("WatchJob", [&] { return WatchJobUnguarded(ctx, req, writer); });
  ReleaseStream();
  return st;
}

grpc::Status Coordinator::Join(grpc::ServerContext* ctx, Stream* stream) {
  if (grpc::Status st = AcquireStream("Join"); !st.ok()) return st;
  grpc::Status st = GuardRpc("Join", [&] { return JoinUnguarded(ctx, stream); });
  ReleaseStream();
  return st;
}

grpc::Status Coordinator::PutBlob(grpc::ServerContext* ctx,
                                  grpc::ServerReader<v1::BlobChunk>* reader,
                                  v1::BlobInfo* resp) {
  if (grpc::Status st = AcquireBlobStream("PutBlob"); !st.ok()) return st;
  UploadActive(ctx);
  grpc::Status st =
      GuardRpc("PutBlob", [&] { return PutBlobUnguarded(ctx, reader, resp); });
  UploadEnded(ctx);
  ReleaseBlobStream();
  return st;
}

grpc::Status Coordinator::GetBlob(grpc::ServerContext* ctx, const v1::GetBlobRequest* req,
                                  grpc::ServerWriter<v1::BlobChunk>* writer) {
  if (grpc::Status st = AcquireBlobStream("GetBlob"); !st.ok()) return st;
  grpc::Status st =
      GuardRpc("GetBlob", [&] { return GetBlobUnguarded(ctx, req, writer); });
  ReleaseBlobStream();
  return st;
}

grpc::Status Coordinator::AcquireStream(const char* rpc) {
  absl::MutexLock lock(&mu_);
  if (open_streams_ >= options_.max_streams) {
    return grpc::Status(
        grpc::RESOURCE_EXHAUSTED,
        absl::StrCat(rpc, ": ", open_streams_,
                     " Join/WatchJob/blob streams are open, the server's limit "
                     "(--max_streams)"));
  }
  ++open_streams_;
  return grpc::Status::OK;
}

void Coordinator::ReleaseStream() {
  absl::MutexLock lock(&mu_);
  --open_streams_;
}

grpc::Status Coordinator::AcquireBlobStream(const char* rpc) {
  absl::MutexLock lock(&mu_);
  if (open_blob_streams_ >= options_.max_blob_streams) {
    return grpc::Status(grpc::RESOURCE_EXHAUSTED,
                        absl::StrCat(rpc, ": ", open_blob_streams_,
                                     " PutBlob/GetBlob streams are open, the server's "
                                     "limit (--max_blob_streams)"));
  }
  ++open_blob_streams_;
  return grpc::Status::OK;
}

void Coordinator::ReleaseBlobStream() {
  absl::MutexLock lock(&mu_);
  --open_blob_streams_;
}

void Coordinator::UploadActive(grpc::ServerContext* ctx) {
  absl::MutexLock lock(&mu_);
  uploads_[ctx] = env_->Now();
}

void Coordinator::UploadEnded(grpc::ServerContext* ctx) {
  absl::MutexLock lock(&mu_);
  uploads_.erase(ctx);
}

}  // namespace gradsync
