#include "worker/sync/ps_client.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "absl/strings/numbers.h"
#include "spdlog/spdlog.h"
#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/job_secret.h"
#include "common/grpc/tensor_frame.h"

namespace gradsync {
namespace {

// How long past its deadline a call may take to report before it is
// cancelled (gRPC ends calls at their deadline; this only bounds our wait).
constexpr absl::Duration kCallGrace = absl::Seconds(5);

}  // namespace

std::vector<PsPiece> MakePsPieces(const std::string& job_id,
                                  const std::vector<v1::PsShardInfo>& shards,
                                  const PsLayout& layout) {
  std::vector<PsPiece> pieces;
  pieces.reserve(layout.partitions.size());
  for (const PsPartition& part : layout.partitions) {
    PsPiece p;
    p.key = absl::StrCat(job_id, "/p", part.index);
    p.address = shards[part.shard].address();
    p.offset = part.range.begin;
    p.count = part.range.size;
    pieces.push_back(std::move(p));
  }
  return pieces;
}

PsCredentials PsCredentialsOf(const v1::Assignment& a) {
  PsCredentials c;
  c.secret = a.job_secret();
  c.world = a.world_size();
  c.resume_secret = a.resume_secret();
  c.resume_world = a.resume_world();
  return c;
}

void AddPsCredentials(const PsCredentials& creds, grpc::ClientContext* ctx) {
  ctx->AddMetadata(kJobWorldMetadata, std::to_string(creds.world));
  ctx->AddMetadata(kJobSecretMetadata, creds.secret);
  if (!creds.resume_secret.empty()) {
    ctx->AddMetadata(kResumeWorldMetadata, std::to_string(creds.resume_world));
    ctx->AddMetadata(kResumeSecretMetadata, creds.resume_secret);
  }
}

PsClient::PsClient(int rank, PsCredentials creds, std::vector<PsPiece> pieces,
                   WireDtype wire, const StallWatch* stall)
    : rank_(rank),
      creds_(std::move(creds)),
      wire_(wire),
      stall_(stall),
      pieces_(std::move(pieces)) {
  for (size_t i = 0; i < pieces_.size(); ++i) {
    all_.push_back(static_cast<int>(i));
    auto& stub = stubs_[pieces_[i].address];
    if (!stub) stub = std::make_unique<grpc::GenericStub>(MakeChannel(pieces_[i].address));
  }
  set_push_window(DefaultPushWindow(stubs_.size()));
}

size_t PsClient::DefaultPushWindow(size_t shards) {
  const size_t fallback = 2 * shards + 2;
  const char* env = std::getenv(kPushWindowEnv);
  if (env == nullptr || *env == '\0') return fallback;
  uint32_t w = 0;
  if (!absl::SimpleAtoi(env, &w)) {
    static std::once_flag warned;
    std::call_once(warned, [env, fallback] {
      spdlog::warn("{}='{}' is not a whole number; using {}", kPushWindowEnv,
                   env, fallback);
    });
    return fallback;
  }
  return w;
}

void PsClient::set_push_window(size_t window) {
  push_window_ = window == 0 ? 0 : std::max(window, stubs_.size());
}

namespace {

// The calls of one CallAll: call i's context, buffers and status, and the
// calls gRPC has finished that the caller has not taken yet.
class Calls {
 public:
  explicit Calls(size_t n) : ctx_(n), req_(n), resp_(n), status_(n) {}

  grpc::ClientContext& context(size_t i) { return ctx_[i]; }
  const grpc::Status& status(size_t i) const { return status_[i]; }
  const grpc::ByteBuffer& response(size_t i) const { return resp_[i]; }

  // Starts call i; its callback only records that it finished.
  void Start(size_t i, grpc::GenericStub* stub, const std::string& method,
             grpc::ByteBuffer request, const PsCredentials& creds,
             absl::Time deadline) {
    ctx_[i].set_deadline(ToChrono(deadline));
    AddPsCredentials(creds, &ctx_[i]);
    req_[i] = std::move(request);
    stub->UnaryCall(&ctx_[i], method, grpc::StubOptions(), &req_[i], &resp_[i],
                    [this, i](grpc::Status s) {
                      status_[i] = std::move(s);
                      absl::MutexLock l(&mu_);
                      finished_.push_back(i);
                    });
  }

  // Waits until a call finished or `wake`; moves the finished ones (maybe
  // none) into `batch`. False when it woke at `wake` with none.
  bool Take(absl::Time wake, std::vector<size_t>* batch) {
    absl::MutexLock l(&mu_);
    auto any = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !finished_.empty();
    };
    const bool woke = mu_.AwaitWithDeadline(absl::Condition(&any), wake);
    batch->swap(finished_);
    finished_.clear();
    return woke;
  }

  void CancelAll() {
    for (auto& c : ctx_) c.TryCancel();  // each call then ends promptly
  }

 private:
  std::vector<grpc::ClientContext> ctx_;
  std::vector<grpc::ByteBuffer> req_, resp_;
  std::vector<grpc::Status> status_;
  absl::Mutex mu_;
  std::vector<size_t> finished_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::Status PsClient::CallAll(
    const std::string& method, const std::vector<int>& which,
    const std::function<grpc::ByteBuffer(const PsPiece&)>& request, float* out,
    absl::Time deadline, const WaitTag& tag, size_t window) {
  const size_t n = which.size();
  if (window == 0 || window > n) window = n;
  Calls calls(n);
  {
    absl::MutexLock lock(&mu_);
    if (!aborted_.ok()) return aborted_;
    for (size_t i = 0; i < n; ++i) active_.insert(&calls.context(i));
  }
  // 1-2. (An Abort before a call starts cancels it as it starts.)
  size_t launched = 0;
  auto launch = [&]() {
    const PsPiece& piece = pieces_[which[launched]];
    calls.Start(launched++, stubs_[piece.address].get(), method, request(piece),
                creds_, deadline);
  };
  while (launched < window) launch();
  // 3-4.
  absl::Status first;
  bool cancelled = false;
  std::vector<size_t> batch;
  StallWait stall(stall_);
  std::vector<bool> answered(n, false);
  for (size_t taken = 0; taken < launched; taken += batch.size()) {
    // Once cancelled, every call reports promptly; keep each wait bounded.
    const absl::Time until = (cancelled ? absl::Now() : deadline) + kCallGrace;
    const absl::Time wake = cancelled ? until : stall.Until(until);
    if (!calls.Take(wake, &batch)) {
      if (wake < until) {
        stall.Check(
            [&] { return DescribeStall(tag, which, answered, launched); });
      } else if (!cancelled) {
        calls.CancelAll();
        cancelled = true;
      }
    }
    for (size_t i : batch) {
      answered[i] = true;
      absl::Status st = TakeReply(pieces_[which[i]], calls.status(i),
                                  calls.response(i), out);
      if (st.ok() || !first.ok()) continue;
      first = std::move(st);
      // The step cannot succeed any more: do not wait for the others.
      calls.CancelAll();
      cancelled = true;
    }
    // Each finished call lets the next one start (never once cancelled).
    for (size_t k = 0; k < batch.size() && launched < n && !cancelled; ++k) {
      launch();
    }
  }
  if (launched < n && first.ok()) {
    first = absl::DeadlineExceededError(absl::StrCat(
        "PS ", tag.phase, " of step ", tag.step, ": ", n - launched, " of ",
        n, " pieces not sent before the deadline"));
  }
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < n; ++i) active_.erase(&calls.context(i));
  }
  if (!first.ok()) stall.Failed();
  return first;
}

StallReport PsClient::DescribeStall(const WaitTag& tag,
                                    const std::vector<int>& which,
                                    const std::vector<bool>& answered,
                                    size_t launched) const {
  StallReport r;
  r.step = tag.step;
  r.bucket = tag.bucket;
  r.phase = tag.phase;
  size_t outstanding = 0;
  for (size_t i = 0; i < launched; ++i) {
    if (answered[i]) continue;
    if (outstanding++ == 0) {
      const PsPiece& p = pieces_[which[i]];
      r.waiting_for = absl::StrCat("PS shard ", p.address, " (", p.key, ")");
    }
  }
  if (outstanding > 1) {
    absl::StrAppend(&r.waiting_for, " and ", outstanding - 1, " more piece",
                    outstanding > 2 ? "s" : "");
  }
  if (launched < which.size()) {
    absl::StrAppend(&r.waiting_for, " (", which.size() - launched,
                    " not sent yet)");
  }
  return r;
}

absl::Status PsClient::TakeReply(const PsPiece& piece,
                                 const grpc::Status& status,
                                 const grpc::ByteBuffer& response,
                                 float* out) const {
  if (!status.ok()) {
    absl::Status st = FromGrpcStatus(status);
    return absl::Status(st.code(), absl::StrCat("PS shard ", piece.address, " (",
                                                piece.key, "): ", st.message()));
  }
  if (out == nullptr) return absl::OkStatus();
  absl::StatusOr<DecodedFrame> f = DecodedFrame::Parse(response);
  if (!f.ok()) return f.status();
  if (f->count() != piece.count) {
    return absl::DataLossError(absl::StrCat(
        "PS shard ", piece.address, " answered ", f->count(), " floats for ",
        piece.key, ", expected ", piece.count));
  }
  f->CopyTo(out + piece.offset);
  return absl::OkStatus();
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
      nullptr, deadline, WaitTag{0, -1, "init"});
}

absl::Status PsClient::Pull(float* params, bool initial, absl::Time deadline) {
  return PullAt(initial ? kPullInitialStep : 0, params, deadline);
}

absl::Status PsClient::FinalPull(float* params, absl::Time deadline) {
  return PullAt(kPullFinalStep, params, deadline);
}

absl::Status PsClient::PullAt(int64_t step, float* params,
                              absl::Time deadline) {
  return CallAll(
      "/gradsync.v1.ParameterServer/Pull", all_,
      [&](const PsPiece& p) {
        TensorHeader h;
        h.set_kind(TensorHeader::PULL);
        h.set_step(step);
        h.set_job_id(p.key);
        h.set_rank(rank_);
        h.set_offset(p.offset);
        return EncodeHeaderOnly(h);
      },
      params, deadline, WaitTag{std::min<int64_t>(step, 0), -1, "pull"});
}

absl::Status PsClient::PushPull(int64_t step, const float* grad, float* params,
                                const std::vector<int>& pieces,
                                absl::Time deadline, int bucket) {
  return CallAll(
      "/gradsync.v1.ParameterServer/PushPull", StaggeredOrder(pieces),
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
        if (IsLossy(wire_)) {
          return EncodeFrameAs(h, wire_, grad + p.offset, p.count);
        }
        return EncodeFrame(h, grad + p.offset, p.count, nullptr);
      },
      params, deadline, WaitTag{step, bucket, "push-pull"}, push_window_);
}

std::vector<int> PsClient::StaggeredOrder(const std::vector<int>& pieces) const {
  const size_t s = stubs_.size();
  std::vector<int> order(pieces);
  if (s < 2) return order;
  const size_t shift = static_cast<size_t>(rank_) % s;
  for (size_t begin = 0; begin + s <= order.size(); begin += s) {
    std::rotate(order.begin() + begin, order.begin() + begin + shift,
                order.begin() + begin + s);
  }
  return order;
}

void PsClient::Abort(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (aborted_.ok()) aborted_ = status;
  for (grpc::ClientContext* c : active_) c->TryCancel();
}

}  // namespace gradsync
