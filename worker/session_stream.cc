#include "worker/session_stream.h"

#include <utility>

#include "common/grpc/valid_utf8.h"

namespace gradsync {

SessionStream::SessionStream(v1::Coordinator::Stub* stub, grpc::ClientContext* ctx)
    : ctx_(ctx) {
  stub->async()->Join(ctx, this);
  // The hold keeps the call from ending while Write may still start a write
  // (StartWrite after OnDone is not allowed); Finish releases it.
  AddHold();
  StartRead(&reading_);
  StartCall();
}

SessionStream::~SessionStream() {
  bool finished;
  {
    absl::MutexLock lock(&mu_);
    finished = closed_;
  }
  if (!finished) {
    ctx_->TryCancel();
    Finish();
  }
}

bool SessionStream::Read(v1::CoordinatorMessage* m) {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](SessionStream* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
        return !s->inbox_.empty() || s->read_over_;
      },
      this));
  if (inbox_.empty()) return false;
  *m = std::move(inbox_.front());
  inbox_.pop_front();
  return true;
}

bool SessionStream::Write(const v1::WorkerMessage& m) {
  absl::MutexLock lock(&mu_);
  if (closed_ || !write_ok_) return false;
  writing_ = m;
  // A user's model or data can put any bytes into an error; the session
  // must carry them, not break on them.
  MakeStringsValidUtf8(&writing_);
  write_pending_ = true;
  // Under mu_: Finish cannot release the hold before this write started.
  StartWrite(&writing_);
  mu_.Await(absl::Condition(
      +[](bool* pending) { return !*pending; }, &write_pending_));
  return write_ok_;
}

grpc::Status SessionStream::Finish() {
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    mu_.Await(absl::Condition(
        +[](bool* pending) { return !*pending; }, &write_pending_));
  }
  RemoveHold();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));
  return status_;
}

void SessionStream::OnReadDone(bool ok) {
  absl::MutexLock lock(&mu_);
  if (!ok) {
    read_over_ = true;
    return;
  }
  inbox_.push_back(std::move(reading_));
  reading_.Clear();
  StartRead(&reading_);
}

void SessionStream::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  write_pending_ = false;
  if (!ok) write_ok_ = false;
}

void SessionStream::OnDone(const grpc::Status& status) {
  absl::MutexLock lock(&mu_);
  status_ = status;
  read_over_ = true;
  done_ = true;
}

}  // namespace gradsync
