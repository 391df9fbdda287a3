#include "worker/ps_client.h"

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/tensor_frame.h"

namespace gradsync {

PsClient::PsClient(std::string job_id, int rank,
                   const std::vector<v1::PsShardInfo>& shards)
    : job_id_(std::move(job_id)), rank_(rank) {
  for (const v1::PsShardInfo& info : shards) {
    Shard s;
    s.info = info;
    s.channel = MakeChannel(info.address());
    s.stub = std::make_unique<grpc::GenericStub>(s.channel);
    shards_.push_back(std::move(s));
  }
}

absl::Status PsClient::CallAll(
    const std::string& method,
    const std::function<grpc::ByteBuffer(const Shard&)>& request, float* out,
    absl::Time deadline) {
  const size_t n = shards_.size();
  std::vector<grpc::ClientContext> ctx(n);
  std::vector<grpc::ByteBuffer> req(n), resp(n);
  std::vector<grpc::Status> status(n);
  absl::Mutex done_mu;
  size_t done = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!aborted_.ok()) return aborted_;
    for (size_t i = 0; i < n; ++i) active_.insert(&ctx[i]);
  }
  for (size_t i = 0; i < n; ++i) {
    ctx[i].set_deadline(ToChrono(deadline));
    req[i] = request(shards_[i]);
    shards_[i].stub->UnaryCall(&ctx[i], method, grpc::StubOptions(), &req[i],
                               &resp[i], [&, i](grpc::Status s) {
                                 status[i] = std::move(s);
                                 absl::MutexLock l(&done_mu);
                                 ++done;
                               });
  }
  {
    // Every call ends by its deadline, so this wait is bounded.
    absl::MutexLock l(&done_mu);
    auto all_done = [&done, n]() { return done == n; };
    done_mu.Await(absl::Condition(&all_done));
  }
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < n; ++i) active_.erase(&ctx[i]);
  }
  absl::Status first;
  for (size_t i = 0; i < n && first.ok(); ++i) {
    if (!status[i].ok()) {
      absl::Status st = FromGrpcStatus(status[i]);
      first = absl::Status(
          st.code(), absl::StrCat("PS shard ", i, " (", shards_[i].info.address(),
                                  "): ", st.message()));
      continue;
    }
    if (out == nullptr) continue;
    absl::StatusOr<DecodedFrame> f = DecodedFrame::Parse(resp[i]);
    if (!f.ok()) {
      first = f.status();
    } else if (f->count() != shards_[i].info.count()) {
      first = absl::DataLossError(absl::StrCat(
          "PS shard ", i, " answered ", f->count(), " floats, expected ",
          shards_[i].info.count()));
    } else {
      f->CopyTo(out + shards_[i].info.offset());
    }
  }
  return first;
}

absl::Status PsClient::Init(const float* params, const v1::ShardConfig& config,
                            absl::Time deadline) {
  return CallAll(
      "/gradsync.v1.ParameterServer/Init",
      [&](const Shard& s) {
        TensorHeader h;
        h.set_kind(TensorHeader::INIT);
        h.set_job_id(job_id_);
        h.set_rank(rank_);
        h.set_offset(s.info.offset());
        *h.mutable_config() = config;
        // Init completes before we return, and params outlive the call.
        return EncodeFrame(h, params + s.info.offset(), s.info.count(), nullptr);
      },
      nullptr, deadline);
}

absl::Status PsClient::Pull(float* params, bool initial, absl::Time deadline) {
  return CallAll(
      "/gradsync.v1.ParameterServer/Pull",
      [&](const Shard& s) {
        TensorHeader h;
        h.set_kind(TensorHeader::PULL);
        h.set_step(initial ? -1 : 0);
        h.set_job_id(job_id_);
        h.set_rank(rank_);
        h.set_offset(s.info.offset());
        return EncodeHeaderOnly(h);
      },
      params, deadline);
}

absl::Status PsClient::PushPull(int64_t step, const float* grad, float* params,
                                absl::Time deadline) {
  return CallAll(
      "/gradsync.v1.ParameterServer/PushPull",
      [&](const Shard& s) {
        TensorHeader h;
        h.set_kind(TensorHeader::GRAD);
        h.set_job_id(job_id_);
        h.set_rank(rank_);
        h.set_step(step);
        h.set_offset(s.info.offset());
        // The answer arrives only after the server read the whole request,
        // so `grad` is not needed after CallAll returns; the request buffers
        // (and their slice references) are destroyed before that.
        return EncodeFrame(h, grad + s.info.offset(), s.info.count(), nullptr);
      },
      params, deadline);
}

void PsClient::Abort(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (aborted_.ok()) aborted_ = status;
  for (grpc::ClientContext* c : active_) c->TryCancel();
}

}  // namespace gradsync
