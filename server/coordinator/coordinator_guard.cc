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
  if (grpc::Status st = Acquire(&session_slots_, "WatchJob"); !st.ok()) return st;
  grpc::Status st =
      GuardRpc("WatchJob", [&] { return WatchJobUnguarded(ctx, req, writer); });
  Release(&session_slots_);
  return st;
}

grpc::Status Coordinator::Join(grpc::ServerContext* ctx, Stream* stream) {
  if (grpc::Status st = Acquire(&session_slots_, "Join"); !st.ok()) return st;
  grpc::Status st = GuardRpc("Join", [&] { return JoinUnguarded(ctx, stream); });
  Release(&session_slots_);
  return st;
}

grpc::Status Coordinator::PutBlob(grpc::ServerContext* ctx,
                                  grpc::ServerReader<v1::BlobChunk>* reader,
                                  v1::BlobInfo* resp) {
  if (grpc::Status st = Acquire(&blob_slots_, "PutBlob"); !st.ok()) return st;
  UploadActive(ctx);
  grpc::Status st =
      GuardRpc("PutBlob", [&] { return PutBlobUnguarded(ctx, reader, resp); });
  UploadEnded(ctx);
  Release(&blob_slots_);
  return st;
}

grpc::Status Coordinator::GetBlob(grpc::ServerContext* ctx, const v1::GetBlobRequest* req,
                                  grpc::ServerWriter<v1::BlobChunk>* writer) {
  if (grpc::Status st = Acquire(&blob_slots_, "GetBlob"); !st.ok()) return st;
  grpc::Status st =
      GuardRpc("GetBlob", [&] { return GetBlobUnguarded(ctx, req, writer); });
  Release(&blob_slots_);
  return st;
}

grpc::Status Coordinator::Acquire(StreamSlots* slots, const char* rpc) {
  absl::MutexLock lock(&mu_);
  if (slots->open >= slots->limit) {
    return grpc::Status(
        grpc::RESOURCE_EXHAUSTED,
        absl::StrCat(rpc, ": ", slots->open, " ", slots->streams,
                     " streams are open, the server's limit (", slots->flag, ")"));
  }
  ++slots->open;
  return grpc::Status::OK;
}

void Coordinator::Release(StreamSlots* slots) {
  absl::MutexLock lock(&mu_);
  --slots->open;
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
