#include "worker/collectives/transport/grpc/peer_sender.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/job_secret.h"
#include "common/grpc/security.h"

namespace gradsync {

PeerSender::PeerSender(const std::string& target, const PeerCredentials& creds, bool bulk)
    : target_(target), channel_(MakePeerChannel(target, bulk)), stub_(channel_) {
  ctx_.AddMetadata(kJobIdMetadata, creds.job_id);
  ctx_.AddMetadata(kJobRankMetadata, std::to_string(creds.rank));
  ctx_.AddMetadata(kJobSecretMetadata, creds.secret);
  AddClusterToken(&ctx_);  // MakePeerChannel adds no interceptor
}

absl::Status PeerSender::Start(absl::Time deadline,
                               const std::function<absl::Status()>& abandon,
                               const Env* env) {
  absl::Status st = WaitForConnected(channel_.get(), target_, deadline, abandon, env);
  if (!st.ok()) return st;
  stub_.PrepareBidiStreamingCall(&ctx_, "/gradsync.v1.Peer/Stream", grpc::StubOptions(),
                                 this);
  // Writes start from outside the reactions (Enqueue on the collective's
  // thread), so the call must be held open until Close, else it may be
  // torn down between a finished read and our next StartWrite.
  AddHold();
  StartRead(&ack_);
  StartCall();
  {
    absl::MutexLock lock(&mu_);
    started_ = true;
  }
  return absl::OkStatus();
}

absl::Status PeerSender::Enqueue(grpc::ByteBuffer buf) {
  absl::MutexLock lock(&mu_);
  if (done_) return error_;
  if (closing_) return absl::FailedPreconditionError("stream closing");
  queue_.push_back(std::move(buf));
  if (!writing_) {
    writing_ = true;
    StartWrite(&queue_.front());
  }
  return absl::OkStatus();
}

void PeerSender::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  queue_.pop_front();
  if (!ok) {
    writing_ = false;
    queue_.clear();
    return;  // OnDone follows with the reason
  }
  if (!queue_.empty()) {
    StartWrite(&queue_.front());
  } else {
    writing_ = false;
    if (closing_ && !writes_done_) {
      writes_done_ = true;
      StartWritesDone();
    }
  }
}

void PeerSender::OnDone(const grpc::Status& s) {
  absl::MutexLock lock(&mu_);
  done_ = true;
  queue_.clear();
  error_ =
      s.ok()
          ? absl::FailedPreconditionError(absl::StrCat("stream to ", target_, " closed"))
          : absl::UnavailableError(
                absl::StrCat("stream to ", target_, " failed: ", s.error_message()));
}

void PeerSender::Close(absl::Time deadline, const Env* env) {
  {
    absl::MutexLock lock(&mu_);
    if (!started_) return;
    if (closing_) return;  // idempotent
    closing_ = true;
    if (!writing_ && !writes_done_ && !done_) {
      writes_done_ = true;
      StartWritesDone();
    }
  }
  RemoveHold();  // exactly once; OnDone may now follow
  AwaitDoneOrCancel(&mu_, &done_, &ctx_, deadline, env);
}

}  // namespace gradsync
