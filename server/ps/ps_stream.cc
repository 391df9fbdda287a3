#include "server/ps/ps_stream.h"

#include <algorithm>
#include <deque>
#include <iterator>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/exception_status.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/tensor_frame.h"

namespace gradsync {
namespace {

class PushPullStreamReactor;

// Lets a reply find its stream's reactor, or find it gone: the reactor
// clears `reactor` in OnDone, under `mu`.
struct StreamGate {
  absl::Mutex mu;
  PushPullStreamReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
};

// `st` with the slice it concerns in front of its message.
absl::Status AboutSlice(const std::string& key, const absl::Status& st) {
  return absl::Status(st.code(), absl::StrCat(key, ": ", st.message()));
}

class PushPullStreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  PushPullStreamReactor(const PsStreamDeps& deps, grpc::CallbackServerContext* ctx)
      : deps_(deps), ctx_(ctx), gate_(std::make_shared<StreamGate>()) {
    {
      absl::MutexLock lock(&gate_->mu);
      gate_->reactor = this;
    }
    StartRead(&buf_);
  }

  // No exception may leave a reactor callback (it would end the shard).
  void OnReadDone(bool ok) override {
    try {
      HandleRead(ok);
    } catch (...) {
      FinishWith(CurrentExceptionStatus("PS PushPullStream"));
    }
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    queue_.pop_front();
    if (!ok) {
      // The stream broke (OnCancel follows): nothing more goes out.
      queue_.clear();
      writing_ = false;
      MaybeFinish();
      return;
    }
    if (!queue_.empty() && !finishing_) {
      StartWrite(&queue_.front());
      return;
    }
    writing_ = false;
    MaybeFinish();
  }

  void OnCancel() override {
    FinishWith(absl::CancelledError("PushPullStream cancelled"));
  }

  void OnDone() override {
    {
      absl::MutexLock lock(&gate_->mu);
      gate_->reactor = nullptr;
    }
    delete this;
  }

  // A push's reply (any thread, under the gate's lock): queue the answer,
  // or end the stream with the error.
  void Deliver(absl::StatusOr<grpc::ByteBuffer> answer) {
    absl::MutexLock lock(&mu_);
    --pending_;
    if (finishing_) {
      MaybeFinish();
      return;
    }
    if (!answer.ok()) {
      BeginFinish(answer.status());
      return;
    }
    queue_.push_back(*std::move(answer));
    if (!writing_) {
      writing_ = true;
      StartWrite(&queue_.front());
    }
    // A half-closed stream ends once its last answer has gone out.
    MaybeFinish();
  }

 private:
  void HandleRead(bool ok) {
    if (!ok) {
      // The client half-closed (or the call broke): answer what is pending,
      // then end.
      absl::MutexLock lock(&mu_);
      half_closed_ = true;
      MaybeFinish();
      return;
    }
    deps_.traffic->Received(buf_.Length());
    absl::StatusOr<DecodedFrame> frame = DecodedFrame::Parse(buf_);
    buf_.Clear();  // the frame holds its own references to the slices
    if (!frame.ok()) {
      FinishWith(frame.status());
      return;
    }
    const TensorHeader& h = frame->header();
    if (absl::Status access = Check(h); !access.ok()) {
      if (absl::IsPermissionDenied(access)) {
        deps_.refusals->Refused("PS PushPullStream", ctx_->peer(), access.message());
      }
      FinishWith(AboutSlice(h.job_id(), access));
      return;
    }
    if (h.kind() != TensorHeader::GRAD) {
      FinishWith(AboutSlice(h.job_id(),
                            absl::InvalidArgumentError("PushPull expects a GRAD frame")));
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      if (finishing_) return;  // no more reads
      ++pending_;
    }
    TensorHeader header;
    header.set_kind(TensorHeader::PARAMS);
    header.set_job_id(h.job_id());
    header.set_offset(h.offset());
    Reply reply = [gate = gate_, header, dtype = frame->dtype(),
                   traffic = deps_.traffic](absl::StatusOr<PsReply> result) mutable {
      absl::StatusOr<grpc::ByteBuffer> answer;
      if (result.ok()) {
        header.set_step(result->step);
        const size_t n = result->params->size();
        answer = IsLossy(dtype)
                     ? EncodeFrameAs(header, dtype, result->params->data(), n)
                     : EncodeFrameShared(header, std::move(result->params), 0, n);
        traffic->Sent(answer->Length());
      } else {
        answer = AboutSlice(header.job_id(), result.status());
      }
      absl::MutexLock lock(&gate->mu);
      if (gate->reactor != nullptr) gate->reactor->Deliver(std::move(answer));
    };
    // As a unary PushPull (its answers may go out at once: Deliver takes
    // mu_, not held here).
    SumPush(*std::move(frame), std::move(reply), deps_);
    // Under mu_, so that no read starts after Finish (no reaction runs
    // inline in StartRead).
    absl::MutexLock lock(&mu_);
    if (!finishing_) StartRead(&buf_);
  }

  // The caller's right to push `h`: checked once per (job, rank) of the
  // stream (the metadata does not change while it is open).
  absl::Status Check(const TensorHeader& h) {
    const std::string job = JobOfSliceKey(h.job_id());
    if (!checked_job_.empty() && job == checked_job_ && h.rank() == checked_rank_) {
      return absl::OkStatus();
    }
    absl::Status st =
        deps_.access->CheckMember(ctx_->client_metadata(), h.job_id(), h.rank());
    if (st.ok()) {
      checked_job_ = job;
      checked_rank_ = h.rank();
    }
    return st;
  }

  void FinishWith(const absl::Status& st) {
    absl::MutexLock lock(&mu_);
    BeginFinish(st);
  }

  // Ends the stream with `st` once the write in flight is done; queued
  // answers are dropped, pending ones will be.
  void BeginFinish(const absl::Status& st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_) return;
    finishing_ = true;
    status_ = st;
    if (writing_) {
      // Keep the write in flight (its buffer) until OnWriteDone.
      while (queue_.size() > 1) queue_.pop_back();
    } else {
      queue_.clear();
    }
    MaybeFinish();
  }

  // Finish once the stream is ending (an error, or half-closed with every
  // answer out) and no write is in flight. gRPC runs the reactions of a
  // default reactor on its own threads, never inline in Finish or
  // StartWrite, so calling them under mu_ cannot re-enter.
  void MaybeFinish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || writing_) return;
    if (!finishing_) {
      if (!half_closed_ || pending_ > 0 || !queue_.empty()) return;
      finishing_ = true;
    }
    finished_ = true;
    Finish(ToGrpcStatus(status_));
  }

  const PsStreamDeps deps_;
  grpc::CallbackServerContext* const ctx_;
  const std::shared_ptr<StreamGate> gate_;
  grpc::ByteBuffer buf_;     // the one read in flight (reactions only)
  std::string checked_job_;  // reactions only (one read at a time)
  int checked_rank_ = -1;

  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);  // front: in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // pushes not answered yet
  bool half_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

void SpreadAnswers(PsCompletions done, ReducePool* pool) {
  const size_t n = done.size();
  if (n <= kPsAnswersHere) {
    RunCompletions(&done);
    return;
  }
  const size_t groups =
      std::min(n, static_cast<size_t>(std::max(1, pool->threads())) + 1);
  const size_t here = std::min(kPsInlineReplies, (n + groups - 1) / groups);
  // The pool's groups first, so that they are sent while this thread sends
  // its own.
  size_t next = here;
  for (size_t tasks = groups - 1; tasks > 0 && next < n; --tasks) {
    const size_t take = (n - next + tasks - 1) / tasks;
    PsCompletions part(std::make_move_iterator(done.begin() + next),
                       std::make_move_iterator(done.begin() + next + take));
    next += take;
    pool->ScheduleFirst([part = std::move(part)]() mutable { RunCompletions(&part); });
  }
  done.resize(here);
  RunCompletions(&done);
}

void SumPush(DecodedFrame frame, Reply reply, const PsStreamDeps& deps) {
  const TensorHeader& h = frame.header();
  PsCompletions done;
  if (deps.inline_bytes > 0 && frame.count() * sizeof(float) <= deps.inline_bytes &&
      deps.store->TryPush(
          h.job_id(), h.step(), h.rank(), frame.count(),
          [&frame](float* dst) { frame.AddTo(dst); }, &reply, &done)) {
    deps.traffic->Summed(true);
    SpreadAnswers(std::move(done), deps.pool);
    return;
  }
  deps.traffic->Summed(false);
  // The frame keeps the received slices alive until the sum. A reduce
  // thread sends the answers it completes itself, one after another: the
  // pool's other thread may be summing, and the answers would wait for it.
  deps.pool->Schedule(
      [store = deps.store, f = std::move(frame), reply = std::move(reply)]() mutable {
        const TensorHeader& fh = f.header();
        store->Push(
            fh.job_id(), fh.step(), fh.rank(), f.count(),
            [&f](float* dst) { f.AddTo(dst); }, std::move(reply));
      });
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewPushPullStreamReactor(
    const PsStreamDeps& deps, grpc::CallbackServerContext* ctx) {
  return new PushPullStreamReactor(deps, ctx);
}

}  // namespace gradsync
