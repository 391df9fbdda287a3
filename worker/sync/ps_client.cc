#include "worker/sync/ps_client.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/job_secret.h"
#include "common/grpc/tensor_frame.h"
#include "spdlog/spdlog.h"
#include "worker/sync/ps_partition_calls.h"

namespace gradsync {

v1::ShardConfig ShardConfigOf(const JobOptions& job, int64_t resume_step) {
  v1::ShardConfig c;
  c.set_world_size(job.world_size);
  c.set_mode(job.mode == SyncMode::kAsync ? v1::SYNC_MODE_ASYNC : v1::SYNC_MODE_SYNC);
  c.set_staleness(job.staleness.value_or(-1));
  c.set_optimizer(job.optimizer.kind == OptimizerKind::kAdam ? v1::OPTIMIZER_ADAM
                                                             : v1::OPTIMIZER_SGD);
  c.set_lr(job.optimizer.lr);
  c.set_momentum(job.optimizer.momentum);
  c.set_checkpoint_every(job.checkpoint_every);
  c.set_checkpoint_at_start(job.checkpoint_at_start);
  if (!job.resume_from.empty()) {
    c.set_resume_from(job.resume_from);
    c.set_resume_step(resume_step);
  }
  return c;
}

PsClient::PsClient(int rank, PsCredentials creds, std::vector<PsPartitionRef> partitions,
                   WireDtype wire, const StallWatch* stall, const Env* env)
    : rank_(rank),
      creds_(std::move(creds)),
      wire_(wire),
      stall_(stall),
      env_(env),
      partitions_(std::move(partitions)),
      push_stream_(PsPushStreams()) {
  for (size_t i = 0; i < partitions_.size(); ++i) {
    all_.push_back(static_cast<int>(i));
    auto& stub = stubs_[partitions_[i].address];
    if (!stub) {
      stub =
          std::make_unique<grpc::GenericStub>(MakePsDataChannel(partitions_[i].address));
    }
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
      spdlog::warn("{}='{}' is not a whole number; using {}", kPushWindowEnv, env,
                   fallback);
    });
    return fallback;
  }
  return w;
}

void PsClient::set_push_window(size_t window) {
  push_window_ = window == 0 ? 0 : std::max(window, stubs_.size());
}

std::unique_ptr<PsPartitionCalls> PsClient::MakeCalls(const std::string& method, size_t n,
                                                      bool stream) {
  if (stream) {
    return MakeStreamCalls(
        n, [this](const std::string& address) { return StreamFor(address); });
  }
  return MakeUnaryCalls(n, method, &creds_, [this](const std::string& address) {
    return stubs_[address].get();
  });
}

absl::Status PsClient::CallAll(
    const std::string& method, const std::vector<int>& which,
    const std::function<grpc::ByteBuffer(const PsPartitionRef&)>& request, float* out,
    absl::Time deadline, const WaitTag& tag, size_t window, bool stream) {
  const size_t n = which.size();
  if (window == 0 || window > n) window = n;
  if (stream && deadline <= env_->Now()) {
    // A frame carries no deadline: send nothing a unary call would refuse.
    return absl::DeadlineExceededError(absl::StrCat(
        "PS ", tag.phase, " of step ", tag.step, ": deadline already passed"));
  }
  const std::unique_ptr<PsPartitionCalls> made = MakeCalls(method, n, stream);
  PsPartitionCalls& calls = *made;
  {
    absl::MutexLock lock(&mu_);
    if (!aborted_.ok()) return aborted_;
    active_.insert(&calls);
  }
  // 1-2. (An Abort before a call starts cancels it as it starts.)
  size_t launched = 0;
  auto launch = [&]() {
    const PsPartitionRef& partition = partitions_[which[launched]];
    calls.Start(launched++, partition, request(partition), deadline);
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
    const absl::Time until =
        cancelled ? env_->Now() + kPsCallGrace : deadline + calls.grace();
    const absl::Time wake = cancelled ? until : stall.Until(until);
    if (!calls.Take(wake, &batch, env_)) {
      if (wake < until) {
        stall.Check([&] { return DescribeStall(tag, which, answered, launched); });
      } else if (!cancelled) {
        calls.CancelAll(absl::DeadlineExceededError(
            absl::StrCat("no answer to the ", tag.phase, " of step ", tag.step,
                         " before the deadline")));
        cancelled = true;
      }
    }
    for (size_t i : batch) {
      answered[i] = true;
      int64_t step = 0;
      absl::Status st = TakeReply(partitions_[which[i]], calls.status(i),
                                  calls.response(i), out, &step);
      if (st.ok() && tag.bucket >= 0) {  // a PushPull's answer
        int64_t seen = newest_push_reply_step_.load();
        while (step > seen &&
               !newest_push_reply_step_.compare_exchange_weak(seen, step)) {
        }
      }
      if (st.ok() || !first.ok()) continue;
      first = std::move(st);
      // The step cannot succeed any more: do not wait for the others.
      calls.CancelAll(absl::CancelledError(absl::StrCat(
          "the ", tag.phase, " of step ", tag.step, " failed on another partition")));
      cancelled = true;
    }
    // Each finished call lets the next one start (never once cancelled).
    for (size_t k = 0; k < batch.size() && launched < n && !cancelled; ++k) {
      launch();
    }
  }
  if (launched < n && first.ok()) {
    first = absl::DeadlineExceededError(
        absl::StrCat("PS ", tag.phase, " of step ", tag.step, ": ", n - launched, " of ",
                     n, " partitions not sent before the deadline"));
  }
  {
    absl::MutexLock lock(&mu_);
    active_.erase(&calls);
  }
  if (!first.ok()) stall.Failed();
  return first;
}

absl::StatusOr<std::shared_ptr<PsPushStream>> PsClient::StreamFor(
    const std::string& address) {
  absl::MutexLock lock(&mu_);
  if (!aborted_.ok()) return aborted_;
  std::shared_ptr<PsPushStream>& s = streams_[address];
  if (s == nullptr || s->ended()) {
    retired_.erase(
        std::remove_if(retired_.begin(), retired_.end(),
                       [](const std::shared_ptr<PsPushStream>& r) { return r->done(); }),
        retired_.end());
    if (s != nullptr) retired_.push_back(std::move(s));
    s = PsPushStream::Open(stubs_[address].get(), address, PsCredentialMetadata(creds_));
    ++streams_opened_;
  }
  return s;
}

int64_t PsClient::streams_opened() const {
  absl::MutexLock lock(&mu_);
  return streams_opened_;
}

PsClient::~PsClient() {
  std::map<std::string, std::shared_ptr<PsPushStream>> streams;
  std::vector<std::shared_ptr<PsPushStream>> retired;
  {
    absl::MutexLock lock(&mu_);
    streams.swap(streams_);
    retired.swap(retired_);
  }
  // Nothing is pending between calls: a shard answers the half-close at
  // once; one that does not (stopped) is cancelled. Retired streams were
  // cancelled already: this waits for the end of their calls.
  const absl::Time deadline = env_->Now() + kStreamCloseWait;
  for (auto& [address, s] : streams) s->Close(deadline, env_);
  for (auto& s : retired) s->Close(deadline, env_);
  // A stream's OnDone may still hold the last reference to it, and through
  // its ClientContext the channel. Wait until each stream is gone, so that
  // the channel dies with stubs_ on this thread: if the last reference to a
  // channel (and with it to gRPC's callback threads) dropped on one of those
  // threads, gRPC 1.51 would try to join that thread from itself and then
  // crash ("ref_counted.h: assertion failed: prior > 0"; grpc/grpc#32584).
  std::vector<std::weak_ptr<PsPushStream>> gone;
  for (auto& [address, s] : streams) gone.push_back(s);
  for (auto& s : retired) gone.push_back(s);
  streams.clear();
  retired.clear();
  const absl::Time until = env_->Now() + kStreamCloseWait;
  for (const auto& w : gone) {
    while (!w.expired() && env_->Now() < until) {
      env_->SleepFor(absl::Microseconds(200));
    }
  }
}

StallReport PsClient::DescribeStall(const WaitTag& tag, const std::vector<int>& which,
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
      const PsPartitionRef& p = partitions_[which[i]];
      r.waiting_for = absl::StrCat("PS shard ", p.address, " (", p.key, ")");
    }
  }
  if (outstanding > 1) {
    absl::StrAppend(&r.waiting_for, " and ", outstanding - 1, " more partition",
                    outstanding > 2 ? "s" : "");
  }
  if (launched < which.size()) {
    absl::StrAppend(&r.waiting_for, " (", which.size() - launched, " not sent yet)");
  }
  return r;
}

absl::Status PsClient::TakeReply(const PsPartitionRef& partition,
                                 const absl::Status& status,
                                 const grpc::ByteBuffer& response, float* out,
                                 int64_t* step) const {
  *step = 0;
  if (!status.ok()) return status;
  if (out == nullptr) return absl::OkStatus();
  absl::StatusOr<DecodedFrame> f = DecodedFrame::Parse(response);
  if (!f.ok()) return f.status();
  *step = f->header().step();
  if (f->count() != partition.count) {
    return absl::DataLossError(absl::StrCat("PS shard ", partition.address, " answered ",
                                            f->count(), " floats for ", partition.key,
                                            ", expected ", partition.count));
  }
  f->CopyTo(out + partition.offset);
  return absl::OkStatus();
}

absl::Status PsClient::Init(const float* params, const v1::ShardConfig& config,
                            absl::Time deadline) {
  return CallAll(
      "/gradsync.v1.ParameterServer/Init", all_,
      [&](const PsPartitionRef& p) {
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

absl::Status PsClient::PullAt(int64_t step, float* params, absl::Time deadline) {
  return CallAll(
      "/gradsync.v1.ParameterServer/Pull", all_,
      [&](const PsPartitionRef& p) {
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
                                const std::vector<int>& partitions, absl::Time deadline,
                                int bucket) {
  return CallAll(
      "/gradsync.v1.ParameterServer/PushPull", StaggeredOrder(partitions),
      [&](const PsPartitionRef& p) {
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
      params, deadline, WaitTag{step, bucket, "push-pull"}, push_window_, push_stream_);
}

std::vector<int> PsClient::StaggeredOrder(const std::vector<int>& partitions) const {
  const size_t s = stubs_.size();
  std::vector<int> order(partitions);
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
  for (PsPartitionCalls* c : active_) c->CancelAll(status);
  for (auto& [address, s] : streams_) s->Cancel();
}

}  // namespace gradsync
