#include "worker/sync/ps_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/security.h"
#include "common/grpc/tensor_frame.h"

namespace gradsync {

std::shared_ptr<PsPushStream> PsPushStream::Open(
    grpc::GenericStub* stub, std::string address,
    const std::vector<std::pair<std::string, std::string>>& metadata) {
  std::shared_ptr<PsPushStream> s(new PsPushStream(std::move(address)));
  for (const auto& [key, value] : metadata) s->ctx_.AddMetadata(key, value);
  AddClusterToken(&s->ctx_);  // PsClient's channels add no interceptor
  stub->PrepareBidiStreamingCall(&s->ctx_, "/gradsync.v1.ParameterServer/PushPullStream",
                                 grpc::StubOptions(), s.get());
  {
    absl::MutexLock lock(&s->mu_);
    s->self_ = s;  // gRPC's reference, dropped in OnDone
  }
  // Writes start from outside the reactions (the caller's thread), so the
  // call is held open until Cancel, Close or the shard's end of it.
  s->AddHold();
  s->StartRead(&s->read_);
  s->StartCall();
  return s;
}

void PsPushStream::Attach(PsStreamSink* sink) {
  absl::MutexLock lock(&mu_);
  sink_ = sink;
  if (done_ && sink_ != nullptr) sink_->Ended(end_);
}

absl::Status PsPushStream::Write(grpc::ByteBuffer frame) {
  absl::MutexLock lock(&mu_);
  if (done_) return end_;
  if (stopping_) {
    return absl::UnavailableError(
        absl::StrCat("push stream to PS shard ", address_, " is ending"));
  }
  queue_.push_back(std::move(frame));
  if (!writing_) {
    writing_ = true;
    StartWrite(&queue_.front());
  }
  return absl::OkStatus();
}

bool PsPushStream::ended() const {
  absl::MutexLock lock(&mu_);
  return done_ || stopping_;
}

bool PsPushStream::done() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

bool PsPushStream::TakeHold() {
  if (hold_released_) return false;
  hold_released_ = true;
  return true;
}

void PsPushStream::Cancel() {
  bool release;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    release = TakeHold();
  }
  ctx_.TryCancel();
  // RemoveHold may run OnDone, which takes mu_: never under it.
  if (release) RemoveHold();
}

void PsPushStream::Close(absl::Time deadline, const Env* env) {
  bool release;
  {
    absl::MutexLock lock(&mu_);
    if (done_) return;
    closing_ = true;
    stopping_ = true;
    // Only while the hold is ours: once Cancel or the shard's end released
    // it, the call may be gone before OnDone runs (then just wait for it).
    if (!hold_released_ && !writing_ && !writes_done_) {
      writes_done_ = true;
      StartWritesDone();
    }
    release = TakeHold();
  }
  if (release) RemoveHold();
  AwaitDoneOrCancel(&mu_, &done_, &ctx_, deadline, env);
}

void PsPushStream::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  queue_.pop_front();
  if (!ok) {
    // The call broke; OnReadDone(false) and OnDone follow with the reason.
    queue_.clear();
    writing_ = false;
    return;
  }
  if (!queue_.empty()) {
    StartWrite(&queue_.front());
    return;
  }
  writing_ = false;
  if (closing_ && !writes_done_) {
    writes_done_ = true;
    StartWritesDone();
  }
}

void PsPushStream::OnReadDone(bool ok) {
  if (ok && !DecodedFrame::Parse(read_).ok()) {
    // An answer that names no slice cannot be matched: rather than leave
    // the partitions waiting until their deadline, end the stream (its end
    // fails them at once).
    read_.Clear();
    ctx_.TryCancel();
    ok = false;
  }
  if (ok) {
    {
      absl::MutexLock lock(&mu_);
      if (sink_ != nullptr) sink_->Answered(std::move(read_));
    }
    read_.Clear();
    StartRead(&read_);
    return;
  }
  // The shard ended the stream (or it broke): no more writes; OnDone
  // follows once the hold is gone.
  bool release;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    release = TakeHold();
  }
  if (release) RemoveHold();
}

void PsPushStream::OnDone(const grpc::Status& s) {
  std::shared_ptr<PsPushStream> keep;  // may be the last reference
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
    queue_.clear();
    if (!s.ok()) {
      end_ = FromGrpcStatus(s);  // the sink names the shard
    } else {
      end_ = absl::UnavailableError(
          absl::StrCat("PS shard ", address_, " closed the push stream"));
    }
    if (sink_ != nullptr) sink_->Ended(end_);
    keep = std::move(self_);
  }
}

}  // namespace gradsync
