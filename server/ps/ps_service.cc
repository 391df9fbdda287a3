#include "server/ps/ps_service.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/exception_status.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/tensor_frame.h"
#include "common/spec/job_spec.h"

namespace gradsync {
namespace {

// Completes `reactor` with the parameters of `result` (or its error), in
// the wire format the request came in.
Reply MakeReply(grpc::ServerUnaryReactor* reactor, grpc::ByteBuffer* response,
                TensorHeader header, WireDtype dtype,
                const PsMethodTraffic* traffic) {
  return [reactor, response, header, dtype,
          traffic](absl::StatusOr<PsReply> result) mutable {
    if (!result.ok()) {
      reactor->Finish(ToGrpcStatus(result.status()));
      return;
    }
    header.set_kind(TensorHeader::PARAMS);
    header.set_step(result->step);
    const size_t n = result->params->size();
    *response = IsLossy(dtype)
                    ? EncodeFrameAs(header, dtype, result->params->data(), n)
                    : EncodeFrameShared(header, std::move(result->params), 0, n);
    traffic->Sent(response->Length());
    reactor->Finish(grpc::Status::OK);
  };
}

}  // namespace

grpc::ServerUnaryReactor* PsService::Init(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  traffic_.init.Received(request->Length());
  absl::StatusOr<DecodedFrame> frame = DecodedFrame::Parse(*request);
  if (!frame.ok()) {
    reactor->Finish(ToGrpcStatus(frame.status()));
    return reactor;
  }
  const TensorHeader& h = frame->header();
  const v1::ShardConfig& c = h.config();
  absl::StatusOr<OptimizerKind> kind = ToOptimizerKind(c.optimizer());
  if (!kind.ok()) {
    reactor->Finish(ToGrpcStatus(kind.status()));
    return reactor;
  }
  ShardJobConfig config;
  config.world_size = static_cast<int>(c.world_size());
  config.async = c.mode() == v1::SYNC_MODE_ASYNC;
  config.staleness = c.staleness();
  config.optimizer.kind = *kind;
  config.optimizer.lr = c.lr();
  config.optimizer.momentum = c.momentum();
  config.checkpoint_every = c.checkpoint_every();
  config.resume_from = c.resume_from();
  config.resume_step = c.resume_step();
  auto install = [store = store_, reactor, response, config,
                  f = *std::move(frame)]() {
    const TensorHeader& fh = f.header();
    absl::Status st = GuardStatus("PS Init", [&] {
      std::vector<float> initial(f.count());
      f.CopyTo(initial.data());
      return store->Init(fh.job_id(), config, std::move(initial));
    });
    if (st.ok()) {
      spdlog::info("{}shard slice of {} floats installed ({} {}{})",
                   absl::StrCat("[job ", fh.job_id(), "] "), f.count(),
                   SyncModeName(fh.config().mode()),
                   OptimizerName(fh.config().optimizer()),
                   config.resume_from.empty()
                       ? ""
                       : absl::StrCat(", resumed from ", config.resume_from,
                                      " at step ", config.resume_step));
      TensorHeader ack;
      ack.set_job_id(fh.job_id());
      *response = EncodeHeaderOnly(ack);
    }
    reactor->Finish(ToGrpcStatus(st));
  };
  // Resuming reads a checkpoint file: not on the callback thread.
  if (config.resume_from.empty()) {
    install();
  } else {
    pool_.Schedule(std::move(install));
  }
  return reactor;
}

grpc::ServerUnaryReactor* PsService::Pull(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  traffic_.pull.Received(request->Length());
  absl::StatusOr<DecodedFrame> frame = DecodedFrame::Parse(*request);
  if (!frame.ok()) {
    reactor->Finish(ToGrpcStatus(frame.status()));
    return reactor;
  }
  TensorHeader header;
  header.set_job_id(frame->header().job_id());
  header.set_offset(frame->header().offset());
  // step < 0 asks for the job's initial parameters.
  store_->Pull(frame->header().job_id(), frame->header().step() < 0,
               MakeReply(reactor, response, header, frame->dtype(),
                         &traffic_.pull));
  return reactor;
}

grpc::ServerUnaryReactor* PsService::PushPull(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  traffic_.push_pull.Received(request->Length());
  absl::StatusOr<DecodedFrame> frame = DecodedFrame::Parse(*request);
  if (!frame.ok()) {
    reactor->Finish(ToGrpcStatus(frame.status()));
    return reactor;
  }
  const TensorHeader& h = frame->header();
  if (h.kind() != TensorHeader::GRAD) {
    reactor->Finish(ToGrpcStatus(
        absl::InvalidArgumentError("PushPull expects a GRAD frame")));
    return reactor;
  }
  TensorHeader header;
  header.set_job_id(h.job_id());
  header.set_offset(h.offset());
  const WireDtype dtype = frame->dtype();
  // Steps 2-3 off the callback thread; the frame keeps the slices alive.
  pool_.Schedule([store = store_, f = *std::move(frame),
                  reply = MakeReply(reactor, response, header,
                                    dtype, &traffic_.push_pull)]() mutable {
    const TensorHeader& fh = f.header();
    store->Push(fh.job_id(), fh.step(), fh.rank(), f.count(),
                [&f](float* dst) { f.AddTo(dst); }, std::move(reply));
  });
  return reactor;
}

grpc::ServerUnaryReactor* PsService::EndJob(grpc::CallbackServerContext* ctx,
                                            const v1::EndJobRequest* request,
                                            v1::EndJobResponse* response) {
  store_->EndJob(request->job_id(), request->reason());
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* PsService::Checkpoints(
    grpc::CallbackServerContext* ctx, const v1::CheckpointsRequest* request,
    v1::CheckpointsResponse* response) {
  const CheckpointListing listing = store_->Checkpoints(request->job_id());
  for (int64_t step : listing.steps) response->add_steps(step);
  response->set_slices(listing.slices);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace gradsync
