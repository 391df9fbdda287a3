#include "worker/collectives/transport/grpc/peer_service.h"

#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/exception_status.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/job_secret.h"
#include "common/grpc/tensor_frame.h"

namespace gradsync {

namespace {

class PeerReactor;

// Lets a parked stream's Resume find its reactor, or find it gone: the
// reactor clears `reactor` in OnDone, under `mu`.
struct ReactorGate {
  absl::Mutex mu;
  PeerReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
};

// The credentials a stream's client sent when it opened.
PeerCredentials CredentialsOf(grpc::CallbackServerContext* ctx) {
  const auto& md = ctx->client_metadata();
  PeerCredentials c;
  c.job_id = MetadataValue(md, kJobIdMetadata);
  c.secret = MetadataValue(md, kJobSecretMetadata);
  if (!absl::SimpleAtoi(MetadataValue(md, kJobRankMetadata), &c.rank)) {
    c.rank = -1;
  }
  return c;
}

// One incoming stream:
//  1. at open, ask the mailboxes to admit its credentials; no read starts
//     before the answer (a refusal ends the stream with it);
//  2. each frame read must name the admitted job and rank, else the stream
//     ends with PERMISSION_DENIED and the frame is dropped;
//  3. the frame goes into the job's mailbox; a full mailbox parks the
//     stream until the collective makes room.
class PeerReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  PeerReactor(PeerMailboxes* mailboxes, PeerCredentials creds, std::string peer,
              std::shared_ptr<RefusalLog> refusals)
      : creds_(std::move(creds)),
        peer_(std::move(peer)),
        refusals_(std::move(refusals)),
        gate_(std::make_shared<ReactorGate>()) {
    {
      absl::MutexLock lock(&gate_->mu);
      gate_->reactor = this;
    }
    // 1. (The answer may come at once, on this thread.)
    mailboxes->Admit(creds_,
                     [gate = gate_](absl::StatusOr<std::shared_ptr<JobMailbox>> b) {
                       absl::MutexLock lock(&gate->mu);
                       if (gate->reactor != nullptr)
                         gate->reactor->Admitted(std::move(b));
                     });
  }

  // No exception may leave a reactor callback (it would end the worker):
  // one from parsing or delivering ends this stream with its status.
  void OnReadDone(bool ok) override {
    try {
      HandleRead(ok);
    } catch (...) {
      FinishOnce(ToGrpcStatus(
          CurrentExceptionStatus(absl::StrCat("Peer stream of rank ", creds_.rank))));
    }
  }

  void HandleRead(bool ok) {
    if (!ok) {
      FinishOnce(grpc::Status::OK);  // client half-closed (or cancelled)
      return;
    }
    absl::StatusOr<DecodedFrame> frame = DecodedFrame::Parse(buf_);
    buf_.Clear();  // the frame holds its own references to the slices
    if (!frame.ok()) {
      FinishOnce(ToGrpcStatus(frame.status()));
      return;
    }
    // 2.
    if (frame->header().job_id() != creds_.job_id ||
        frame->header().rank() != creds_.rank) {
      Refuse(
          absl::PermissionDeniedError("frame names another job or rank than its stream"));
      return;
    }
    // 3. (box_ is set before the first read starts.)
    absl::StatusOr<Delivery> d = box()->Push(std::move(*frame), MakeResume());
    // After kParked the resume may already have started the next read on
    // another thread: touch nothing but locals from here.
    if (!d.ok()) {
      FinishOnce(ToGrpcStatus(d.status()));
    } else if (*d == Delivery::kTaken) {
      StartRead(&buf_);
    }
  }

  void OnCancel() override {
    // An admitted member's stream broke: its job cannot go on.
    if (std::shared_ptr<JobMailbox> b = box()) {
      b->Fail(absl::UnavailableError(
          absl::StrCat("stream from rank ", creds_.rank, " broke")));
    }
    // A parked or waiting stream has no read in flight to end it.
    FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }

  void OnDone() override {
    {
      absl::MutexLock lock(&gate_->mu);
      gate_->reactor = nullptr;
    }
    delete this;
  }

  // Step 1's answer: start reading, or end the stream.
  void Admitted(absl::StatusOr<std::shared_ptr<JobMailbox>> b) {
    if (!b.ok()) {
      Refuse(b.status());
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      box_ = *std::move(b);
    }
    StartRead(&buf_);
  }

  // From a Resume: read on, or end the stream with the error.
  // (gRPC runs default reactors' reactions on its own threads, never inline
  // in a Start* or Finish call from another thread, so holding the gate's
  // lock here cannot deadlock with OnDone.)
  void Continue(const absl::Status& st) {
    if (!st.ok()) {
      FinishOnce(ToGrpcStatus(st));
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
    }
    StartRead(&buf_);  // after a racing Finish it just fails
  }

 private:
  std::shared_ptr<JobMailbox> box() {
    absl::MutexLock lock(&mu_);
    return box_;
  }

  Resume MakeResume() {
    return [gate = gate_](const absl::Status& st) {
      absl::MutexLock lock(&gate->mu);
      if (gate->reactor != nullptr) gate->reactor->Continue(st);
    };
  }

  // Ends the stream with `st`; a PERMISSION_DENIED is logged with the
  // caller's address first. (The other answers of admission, an ended job
  // or one that did not start in time, are not logged as refusals.)
  void Refuse(const absl::Status& st) {
    if (absl::IsPermissionDenied(st)) {
      refusals_->Refused(absl::StrCat("Peer stream of rank ", creds_.rank), peer_,
                         st.message());
    }
    FinishOnce(ToGrpcStatus(st));
  }

  void FinishOnce(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(status);
  }

  const PeerCredentials creds_;
  const std::string peer_;  // the caller's address
  const std::shared_ptr<RefusalLog> refusals_;
  const std::shared_ptr<ReactorGate> gate_;
  grpc::ByteBuffer buf_;  // the one read in flight
  absl::Mutex mu_;
  std::shared_ptr<JobMailbox> box_ ABSL_GUARDED_BY(mu_);  // once admitted
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* PeerService::Stream(
    grpc::CallbackServerContext* ctx) {
  streams_.fetch_add(1);
  if (streams_metric_ != nullptr) streams_metric_->Increment();
  return new PeerReactor(mailboxes_, CredentialsOf(ctx), ctx->peer(), refusals_);
}

}  // namespace gradsync
