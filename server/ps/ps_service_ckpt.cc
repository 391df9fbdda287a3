// PsService: the ring-checkpoint methods (SaveCheckpoint, LoadCheckpoint),
// apart from the data path of ps_service.cc.
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/tensor_frame.h"
#include "server/ps/allreduce_checkpoints.h"
#include "server/ps/ps_service.h"

namespace gradsync {
namespace {

// Parses a CKPT frame; INVALID_ARGUMENT when it is something else or its
// data cannot be split into the parameters and header.moments moments.
absl::StatusOr<DecodedFrame> ParseCkptFrame(const grpc::ByteBuffer& request) {
  absl::StatusOr<DecodedFrame> frame = DecodedFrame::Parse(request);
  if (!frame.ok()) return frame.status();
  const TensorHeader& h = frame->header();
  if (h.kind() != TensorHeader::CKPT || h.moments() < 0 || h.moments() > 2 ||
      h.count() % (1 + h.moments()) != 0 || h.step() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a checkpoint piece: kind ", TensorHeader::Kind_Name(h.kind()), ", ",
        h.count(), " floats with ", h.moments(), " moments, step ", h.step()));
  }
  return frame;
}

// Writes the piece in `f` (a CKPT frame) under `root`.
absl::Status SavePiece(const std::string& root, const DecodedFrame& f) {
  const TensorHeader& h = f.header();
  std::vector<float> data(f.count());
  f.CopyTo(data.data());
  const size_t n = f.count() / (1 + h.moments());
  const absl::Span<const float> all(data);
  CheckpointView view;
  view.params = all.subspan(0, n);
  view.optimizer_steps = h.optimizer_steps();
  if (h.moments() >= 1) view.first_moment = all.subspan(n, n);
  if (h.moments() >= 2) view.second_moment = all.subspan(2 * n, n);
  return SaveAllreduceCheckpointPiece(root, h.job_id(), h.step(), h.index(), view);
}

// The CKPT frame of piece (job, step, index) read from `root`.
absl::StatusOr<grpc::ByteBuffer> LoadPiece(const std::string& root,
                                           const TensorHeader& request) {
  absl::StatusOr<Checkpoint> c = LoadAllreduceCheckpointPiece(
      root, request.job_id(), request.step(), request.index());
  if (!c.ok()) return c.status();
  const size_t n = c->params.size();
  const bool m = !c->first_moment.empty(), v = !c->second_moment.empty();
  if ((m && c->first_moment.size() != n) || (v && c->second_moment.size() != n) ||
      (v && !m)) {
    return absl::DataLossError(absl::StrCat("checkpoint piece ", request.index(), " of ",
                                            request.job_id(), " at step ", request.step(),
                                            " has moments of another length"));
  }
  auto data = std::make_shared<std::vector<float>>(std::move(c->params));
  data->insert(data->end(), c->first_moment.begin(), c->first_moment.end());
  data->insert(data->end(), c->second_moment.begin(), c->second_moment.end());
  TensorHeader h;
  h.set_kind(TensorHeader::CKPT);
  h.set_job_id(request.job_id());
  h.set_step(request.step());
  h.set_index(request.index());
  h.set_optimizer_steps(c->optimizer_steps);
  h.set_moments(static_cast<int>(m) + static_cast<int>(v));
  const size_t count = data->size();
  return EncodeFrameShared(h, std::move(data), 0, count);
}

}  // namespace

// Answers a CKPT request: parses it, checks the caller with `access` (the
// frame's job), then runs `work` (which reads or writes a file) on the pool
// and finishes with its frame or error.
template <typename Access, typename Work>
grpc::ServerUnaryReactor* PsService::OnPool(grpc::CallbackServerContext* ctx,
                                            const char* method,
                                            const grpc::ByteBuffer& request,
                                            grpc::ByteBuffer* response, Access access,
                                            Work work) {
  ReducePool* pool = &pool_;
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::StatusOr<DecodedFrame> frame = ParseCkptFrame(request);
  if (!frame.ok()) {
    reactor->Finish(ToGrpcStatus(frame.status()));
    return reactor;
  }
  if (Refused(ctx, reactor, method,
              access(ctx->client_metadata(), frame->header().job_id()))) {
    return reactor;
  }
  pool->Schedule(
      [reactor, response, work = std::move(work), f = *std::move(frame)]() mutable {
        absl::StatusOr<grpc::ByteBuffer> out = work(f);
        if (out.ok()) *response = *std::move(out);
        reactor->Finish(ToGrpcStatus(out.status()));
      });
  return reactor;
}

grpc::ServerUnaryReactor* PsService::SaveCheckpoint(grpc::CallbackServerContext* ctx,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  // Rank 0 of the running job saves.
  auto member = [this](const CallMetadata& md, const std::string& job) {
    return access_->CheckJob(md, job);
  };
  return OnPool(ctx, "SaveCheckpoint", *request, response, member,
                [root = store_->checkpoint_root()](
                    const DecodedFrame& f) -> absl::StatusOr<grpc::ByteBuffer> {
                  absl::Status st = SavePiece(root, f);
                  if (!st.ok()) return st;
                  TensorHeader ack = f.header();
                  ack.clear_count();
                  return EncodeHeaderOnly(ack);
                });
}

grpc::ServerUnaryReactor* PsService::LoadCheckpoint(grpc::CallbackServerContext* ctx,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  // A resuming job reads its predecessor's checkpoint.
  auto resumer = [this](const CallMetadata& md, const std::string& job) {
    return access_->CheckResume(md, job);
  };
  return OnPool(ctx, "LoadCheckpoint", *request, response, resumer,
                [root = store_->checkpoint_root()](const DecodedFrame& f) {
                  return LoadPiece(root, f.header());
                });
}

}  // namespace gradsync
