#include "worker/sync/allreduce_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/tensor_frame.h"
#include "gradsync/v1/gradsync.grpc.pb.h"
#include "worker/sync/ps_resume.h"

namespace gradsync {
namespace {

constexpr char kSave[] = "/gradsync.v1.ParameterServer/SaveCheckpoint";
constexpr char kLoad[] = "/gradsync.v1.ParameterServer/LoadCheckpoint";
// A call that missed its deadline still reports within this.
constexpr absl::Duration kCallGrace = absl::Seconds(5);

TensorHeader CkptHeader(const std::string& job, int64_t step, int index) {
  TensorHeader h;
  h.set_kind(TensorHeader::CKPT);
  h.set_job_id(job);
  h.set_step(step);
  h.set_index(index);
  return h;
}

// Piece r of `s` as one contiguous frame: params, then each moment.
grpc::ByteBuffer PieceFrame(TensorHeader h, const AllreduceState& s, Range r) {
  auto data = std::make_shared<std::vector<float>>();
  data->reserve(3 * r.size);
  for (const std::vector<float>* v :
       {&s.params, &s.optimizer.first, &s.optimizer.second}) {
    if (v->empty()) continue;
    data->insert(data->end(), v->begin() + r.begin, v->begin() + r.begin + r.size);
  }
  h.set_optimizer_steps(s.optimizer.steps);
  h.set_moments(static_cast<int>(!s.optimizer.first.empty()) +
                static_cast<int>(!s.optimizer.second.empty()));
  const size_t count = data->size();
  return EncodeFrameShared(std::move(h), std::move(data), 0, count);
}

}  // namespace

std::vector<Range> AllreduceCheckpointPieces(size_t n) {
  std::vector<Range> out;
  for (size_t b = 0; b < n || out.empty(); b += kAllreduceCheckpointPieceFloats) {
    out.push_back({b, std::min(kAllreduceCheckpointPieceFloats, n - b)});
  }
  return out;
}

AllreduceCheckpointClient::AllreduceCheckpointClient(const std::string& address,
                                                     PsCredentials creds)
    : address_(address),
      creds_(std::move(creds)),
      channel_(MakeChannel(address)),
      stub_(channel_) {}

absl::StatusOr<grpc::ByteBuffer> AllreduceCheckpointClient::Call(
    const std::string& method, const grpc::ByteBuffer& request, absl::Time deadline) {
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(deadline));
  AddPsCredentials(creds_, &ctx);
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return absl::CancelledError("checkpoint cancelled");
    active_ = &ctx;
  }
  grpc::ByteBuffer req = request, resp;
  grpc::Status status;
  absl::Notification done;
  stub_.UnaryCall(&ctx, method, grpc::StubOptions(), &req, &resp, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  if (!done.WaitForNotificationWithDeadline(deadline + kCallGrace)) {
    ctx.TryCancel();
    done.WaitForNotification();  // a cancelled call reports promptly
  }
  {
    absl::MutexLock lock(&mu_);
    active_ = nullptr;
  }
  if (!status.ok()) {
    const absl::Status s = FromGrpcStatus(status);
    return absl::Status(
        s.code(), absl::StrCat("checkpoint on PS shard ", address_, ": ", s.message()));
  }
  return resp;
}

void AllreduceCheckpointClient::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (active_ != nullptr) active_->TryCancel();
}

absl::Status AllreduceCheckpointClient::Save(const std::string& job, int64_t step,
                                             const AllreduceState& state,
                                             absl::Time deadline) {
  const std::vector<Range> pieces = AllreduceCheckpointPieces(state.params.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const TensorHeader h = CkptHeader(job, step, static_cast<int>(i));
    absl::StatusOr<grpc::ByteBuffer> ack =
        Call(kSave, PieceFrame(h, state, pieces[i]), deadline);
    if (!ack.ok()) return ack.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> AllreduceCheckpointClient::NewestStep(const std::string& job,
                                                              absl::Time deadline) {
  absl::StatusOr<v1::CheckpointsResponse> listed =
      ListCheckpoints(channel_, address_, job, creds_, deadline);
  if (!listed.ok()) return listed.status();
  const v1::CheckpointsResponse& resp = *listed;
  if (resp.steps_size() == 0) {
    return absl::NotFoundError(absl::StrCat("cannot resume ", job, ": PS shard ",
                                            address_,
                                            " holds no complete checkpoint of it"));
  }
  return *std::max_element(resp.steps().begin(), resp.steps().end());
}

absl::Status AllreduceCheckpointClient::Load(const std::string& job, int64_t step,
                                             AllreduceState* state, absl::Time deadline) {
  const std::vector<Range> pieces = AllreduceCheckpointPieces(state->params.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    absl::Status st =
        LoadPiece(job, step, static_cast<int>(i), pieces[i], state, deadline);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status AllreduceCheckpointClient::LoadPiece(const std::string& job, int64_t step,
                                                  int index, Range r,
                                                  AllreduceState* state,
                                                  absl::Time deadline) {
  absl::StatusOr<grpc::ByteBuffer> resp =
      Call(kLoad, EncodeHeaderOnly(CkptHeader(job, step, index)), deadline);
  if (!resp.ok()) return resp.status();
  absl::StatusOr<DecodedFrame> f = DecodedFrame::Parse(*resp);
  if (!f.ok()) return f.status();
  const TensorHeader& h = f->header();
  const int moments = h.moments();
  if (h.kind() != TensorHeader::CKPT || moments < 0 || moments > 2 ||
      f->count() != r.size * (1 + moments) || h.optimizer_steps() < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint piece ", index, " of ", job, " at step ", step, " holds ", f->count(),
        " floats with ", moments, " moments; the model needs ", r.size,
        " parameters there (another model?)"));
  }
  std::vector<float> data(f->count());
  f->CopyTo(data.data());
  const size_t n = state->params.size();
  OptimizerState& o = state->optimizer;
  o.steps = h.optimizer_steps();
  o.first.resize(moments >= 1 ? n : 0);
  o.second.resize(moments >= 2 ? n : 0);
  std::vector<float>* dst[] = {&state->params, &o.first, &o.second};
  for (int a = 0; a <= moments; ++a) {
    std::memcpy(dst[a]->data() + r.begin, data.data() + a * r.size,
                r.size * sizeof(float));
  }
  return absl::OkStatus();
}

AllreduceCheckpointer::AllreduceCheckpointer(
    std::unique_ptr<AllreduceCheckpointClient> client, std::string job, int64_t every,
    bool save, absl::Duration timeout, const Env* env)
    : client_(std::move(client)),
      job_(std::move(job)),
      every_(every),
      save_(save),
      timeout_(timeout),
      env_(env) {}

AllreduceCheckpointer::~AllreduceCheckpointer() {
  if (sender_.joinable()) sender_.join();
}

absl::StatusOr<int64_t> AllreduceCheckpointer::Restore(const std::string& old_job,
                                                       size_t n) {
  const absl::Time deadline = env_->Now() + timeout_;
  absl::StatusOr<int64_t> step = client_->NewestStep(old_job, deadline);
  if (!step.ok()) return step.status();
  auto state = std::make_unique<AllreduceState>();
  state->params.resize(n);
  absl::Status st = client_->Load(old_job, *step, state.get(), deadline);
  if (!st.ok()) return st;
  restored_ = std::move(state);
  return *step;
}

absl::StatusOr<AllreduceState*> AllreduceCheckpointer::Buffer() {
  absl::Status st = Wait();
  if (!st.ok()) return st;
  return &buffer_;
}

void AllreduceCheckpointer::Start(int64_t step) {
  sender_ = std::thread([this, step] { Send(step); });
}

void AllreduceCheckpointer::Send(int64_t step) {
  const absl::Time t0 = env_->Now();
  absl::Status st = client_->Save(job_, step, buffer_, t0 + timeout_);
  if (st.ok()) {
    spdlog::info("[job {}] checkpoint of step {} saved ({} floats, {:.3f} s)", job_, step,
                 buffer_.params.size(), absl::ToDoubleSeconds(env_->Now() - t0));
  }
  absl::MutexLock lock(&mu_);
  if (status_.ok()) status_ = st;
}

absl::Status AllreduceCheckpointer::Wait() {
  if (sender_.joinable()) sender_.join();
  absl::MutexLock lock(&mu_);
  return status_;
}

void AllreduceCheckpointer::Abort(const absl::Status& why) {
  {
    absl::MutexLock lock(&mu_);
    if (status_.ok()) status_ = why;
  }
  client_->Cancel();
}

}  // namespace gradsync
