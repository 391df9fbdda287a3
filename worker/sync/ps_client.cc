#include "worker/sync/ps_client.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/tensor_frame.h"

namespace gradsync {

std::vector<PsPiece> MakePsPieces(
    const std::string& job_id, const std::vector<v1::PsShardInfo>& shards,
    const std::vector<std::pair<uint64_t, uint64_t>>& buckets,
    std::vector<std::vector<int>>* pieces_of_bucket) {
  std::vector<PsPiece> pieces;
  pieces_of_bucket->assign(buckets.size(), {});
  for (size_t b = 0; b < buckets.size(); ++b) {
    const uint64_t bb = buckets[b].first, be = bb + buckets[b].second;
    for (size_t s = 0; s < shards.size(); ++s) {
      const uint64_t sb = shards[s].offset(), se = sb + shards[s].count();
      const uint64_t lo = std::max(bb, sb), hi = std::min(be, se);
      if (lo >= hi) continue;
      PsPiece p;
      p.key = absl::StrCat(job_id, "/b", b, "s", s);
      p.address = shards[s].address();
      p.offset = lo;
      p.count = hi - lo;
      (*pieces_of_bucket)[b].push_back(static_cast<int>(pieces.size()));
      pieces.push_back(std::move(p));
    }
  }
  return pieces;
}

PsClient::PsClient(int rank, std::vector<PsPiece> pieces)
    : rank_(rank), pieces_(std::move(pieces)) {
  for (size_t i = 0; i < pieces_.size(); ++i) {
    all_.push_back(static_cast<int>(i));
    auto& stub = stubs_[pieces_[i].address];
    if (!stub) stub = std::make_unique<grpc::GenericStub>(MakeChannel(pieces_[i].address));
  }
}

absl::Status PsClient::CallAll(
    const std::string& method, const std::vector<int>& which,
    const std::function<grpc::ByteBuffer(const PsPiece&)>& request, float* out,
    absl::Time deadline) {
  const size_t n = which.size();
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
    const PsPiece& piece = pieces_[which[i]];
    req[i] = request(piece);
    stubs_[piece.address]->UnaryCall(&ctx[i], method, grpc::StubOptions(), &req[i],
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
      const PsPiece& piece = pieces_[which[i]];
      first = absl::Status(
          st.code(), absl::StrCat("PS shard ", piece.address, " (", piece.key,
                                  "): ", st.message()));
      continue;
    }
    if (out == nullptr) continue;
    const PsPiece& piece = pieces_[which[i]];
    absl::StatusOr<DecodedFrame> f = DecodedFrame::Parse(resp[i]);
    if (!f.ok()) {
      first = f.status();
    } else if (f->count() != piece.count) {
      first = absl::DataLossError(absl::StrCat(
          "PS shard ", piece.address, " answered ", f->count(),
          " floats for ", piece.key, ", expected ", piece.count));
    } else {
      f->CopyTo(out + piece.offset);
    }
  }
  return first;
}

absl::Status PsClient::Init(const float* params, const v1::ShardConfig& config,
                            absl::Time deadline) {
  return CallAll(
      "/gradsync.v1.ParameterServer/Init", all_,
      [&](const PsPiece& p) {
        TensorHeader h;
        h.set_kind(TensorHeader::INIT);
        h.set_job_id(p.key);
        h.set_rank(rank_);
        h.set_offset(p.offset);
        *h.mutable_config() = config;
        // Init completes before we return, and params outlive the call.
        return EncodeFrame(h, params + p.offset, p.count, nullptr);
      },
      nullptr, deadline);
}

absl::Status PsClient::Pull(float* params, bool initial, absl::Time deadline) {
  return CallAll(
      "/gradsync.v1.ParameterServer/Pull", all_,
      [&](const PsPiece& p) {
        TensorHeader h;
        h.set_kind(TensorHeader::PULL);
        h.set_step(initial ? -1 : 0);
        h.set_job_id(p.key);
        h.set_rank(rank_);
        h.set_offset(p.offset);
        return EncodeHeaderOnly(h);
      },
      params, deadline);
}

absl::Status PsClient::PushPull(int64_t step, const float* grad, float* params,
                                const std::vector<int>& pieces,
                                absl::Time deadline) {
  return CallAll(
      "/gradsync.v1.ParameterServer/PushPull", pieces,
      [&](const PsPiece& p) {
        TensorHeader h;
        h.set_kind(TensorHeader::GRAD);
        h.set_job_id(p.key);
        h.set_rank(rank_);
        h.set_step(step);
        h.set_offset(p.offset);
        // The answer arrives only after the server read the whole request,
        // so `grad` is not needed after CallAll returns; the request buffers
        // (and their slice references) are destroyed before that.
        return EncodeFrame(h, grad + p.offset, p.count, nullptr);
      },
      params, deadline);
}

void PsClient::Abort(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (aborted_.ok()) aborted_ = status;
  for (grpc::ClientContext* c : active_) c->TryCancel();
}

}  // namespace gradsync
