#include "server/ps/ps_service.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/exception_status.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/tensor_frame.h"
#include "common/ps_layout.h"
#include "common/spec/job_spec.h"

namespace gradsync {

absl::Status CheckPsReduceThreads(int64_t threads) {
  if (threads >= 1 && threads <= kMaxPsReduceThreads) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--ps_reduce_threads must be 1..",
                                                 kMaxPsReduceThreads, ", got ", threads));
}

namespace {

// Completes `reactor` with the parameters of `result` (or its error), in
// the wire format the request came in.
Reply MakeReply(grpc::ServerUnaryReactor* reactor, grpc::ByteBuffer* response,
                TensorHeader header, WireDtype dtype, const PsMethodTraffic* traffic) {
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

// The slice config of an INIT frame's `c`, for a job of `world` ranks.
absl::StatusOr<ShardJobConfig> ShardJobConfigOf(const v1::ShardConfig& c, int world) {
  absl::StatusOr<OptimizerKind> kind = ToOptimizerKind(c.optimizer());
  if (!kind.ok()) return kind.status();
  ShardJobConfig config;
  config.world_size = world;
  config.async = c.mode() == v1::SYNC_MODE_ASYNC;
  config.staleness = c.staleness();
  config.optimizer.kind = *kind;
  config.optimizer.lr = c.lr();
  config.optimizer.momentum = c.momentum();
  config.checkpoint_every = c.checkpoint_every();
  config.checkpoint_at_start = c.checkpoint_at_start();
  config.resume_from = c.resume_from();
  config.resume_step = c.resume_step();
  return config;
}

// The wait of one Pull, shared by its reactor (OnCancel) and the handler
// that learns the ticket after the store took the reply (which may already
// have finished and destroyed the reactor by then).
struct PullWait {
  absl::Mutex mu;
  uint64_t ticket ABSL_GUARDED_BY(mu) = 0;
  bool cancelled ABSL_GUARDED_BY(mu) = false;
};

// A Pull's reactor: its cancellation (client cancel, or the call's deadline
// passing) ends the store's wait for it.
class PullReactor final : public grpc::ServerUnaryReactor {
 public:
  PullReactor(PsStore* store, std::shared_ptr<PullWait> wait)
      : store_(store), wait_(std::move(wait)) {}

  void OnCancel() override {
    uint64_t ticket;
    {
      absl::MutexLock lock(&wait_->mu);
      wait_->cancelled = true;
      ticket = wait_->ticket;
    }
    if (ticket != 0) {
      store_->CancelPull(ticket, absl::CancelledError("pull cancelled"));
    }
  }
  void OnDone() override { delete this; }

 private:
  PsStore* const store_;
  const std::shared_ptr<PullWait> wait_;
};

// Records the ticket of a waiting Pull; ends the wait at once if the call
// was cancelled before the ticket was known.
void TrackPull(PsStore* store, PullWait* wait, uint64_t ticket) {
  if (ticket == 0) return;
  {
    absl::MutexLock lock(&wait->mu);
    wait->ticket = ticket;
    if (!wait->cancelled) return;
  }
  store->CancelPull(ticket, absl::CancelledError("pull cancelled"));
}

}  // namespace

bool PsService::Refused(grpc::CallbackServerContext* ctx,
                        grpc::ServerUnaryReactor* reactor, const char* method,
                        const absl::Status& access) {
  if (access.ok()) return false;
  refusals_.Refused(absl::StrCat("PS ", method), ctx->peer(), access.message());
  reactor->Finish(ToGrpcStatus(access));
  return true;
}

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
  int world = 0;
  absl::Status access =
      access_->CheckMember(ctx->client_metadata(), h.job_id(), h.rank(), &world);
  if (access.ok() && !c.resume_from().empty()) {
    access = access_->CheckResume(ctx->client_metadata(), c.resume_from());
  }
  if (access.ok() && static_cast<int>(c.world_size()) != world) {
    access = absl::InvalidArgumentError("config.world_size is not the job's");
  }
  if (Refused(ctx, reactor, "Init", access)) return reactor;
  absl::StatusOr<ShardJobConfig> made = ShardJobConfigOf(c, world);
  if (!made.ok()) {
    reactor->Finish(ToGrpcStatus(made.status()));
    return reactor;
  }
  const ShardJobConfig config = *std::move(made);
  auto install = [store = store_, reactor, response, config, f = *std::move(frame)]() {
    const TensorHeader& fh = f.header();
    absl::Status st = GuardStatus("PS Init", [&] {
      std::vector<float> initial(f.count());
      f.CopyTo(initial.data());
      return store->Init(fh.job_id(), config, std::move(initial));
    });
    if (st.ok()) {
      spdlog::info(
          "{}shard slice of {} floats installed ({} {}{})",
          absl::StrCat("[job ", fh.job_id(), "] "), f.count(),
          SyncModeName(fh.config().mode()), OptimizerName(fh.config().optimizer()),
          config.resume_from.empty() ? ""
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
  auto wait = std::make_shared<PullWait>();
  auto* reactor = new PullReactor(store_, wait);
  traffic_.pull.Received(request->Length());
  absl::StatusOr<DecodedFrame> frame = DecodedFrame::Parse(*request);
  if (!frame.ok()) {
    reactor->Finish(ToGrpcStatus(frame.status()));
    return reactor;
  }
  const TensorHeader& h = frame->header();
  if (Refused(ctx, reactor, "Pull",
              access_->CheckMember(ctx->client_metadata(), h.job_id(), h.rank()))) {
    return reactor;
  }
  TensorHeader header;
  header.set_job_id(h.job_id());
  header.set_offset(h.offset());
  Reply reply = MakeReply(reactor, response, header, frame->dtype(), &traffic_.pull);
  // The reactor may be finished (and gone) as soon as the store has `reply`.
  const absl::Time deadline =
      ctx->deadline() == std::chrono::system_clock::time_point::max()
          ? absl::InfiniteFuture()
          : absl::FromChrono(ctx->deadline());
  const uint64_t ticket =
      h.step() == kPullFinalStep
          ? store_->FinalPull(h.job_id(), h.rank(), std::move(reply), deadline)
          : store_->Pull(h.job_id(), h.step() == kPullInitialStep, std::move(reply),
                         deadline);
  TrackPull(store_, wait.get(), ticket);
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
  if (Refused(ctx, reactor, "PushPull",
              access_->CheckMember(ctx->client_metadata(), h.job_id(), h.rank()))) {
    return reactor;
  }
  if (h.kind() != TensorHeader::GRAD) {
    reactor->Finish(
        ToGrpcStatus(absl::InvalidArgumentError("PushPull expects a GRAD frame")));
    return reactor;
  }
  TensorHeader header;
  header.set_job_id(h.job_id());
  header.set_offset(h.offset());
  const WireDtype dtype = frame->dtype();
  // Steps 2-3 here when the push is small and nothing makes it wait, else
  // off the callback thread.
  SumPush(*std::move(frame),
          MakeReply(reactor, response, header, dtype, &traffic_.push_pull), PushDeps());
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* PsService::PushPullStream(
    grpc::CallbackServerContext* ctx) {
  return NewPushPullStreamReactor(PushDeps(), ctx);
}

grpc::ServerUnaryReactor* PsService::EndJob(grpc::CallbackServerContext* ctx,
                                            const v1::EndJobRequest* request,
                                            v1::EndJobResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (Refused(ctx, reactor, "EndJob",
              access_->CheckJob(ctx->client_metadata(), request->job_id()))) {
    return reactor;
  }
  store_->EndJob(request->job_id(), request->reason());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* PsService::Checkpoints(grpc::CallbackServerContext* ctx,
                                                 const v1::CheckpointsRequest* request,
                                                 v1::CheckpointsResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (Refused(ctx, reactor, "Checkpoints",
              access_->CheckResume(ctx->client_metadata(), request->job_id()))) {
    return reactor;
  }
  const CheckpointListing listing = store_->Checkpoints(request->job_id());
  for (int64_t step : listing.steps) response->add_steps(step);
  response->set_slices(listing.slices);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace gradsync
