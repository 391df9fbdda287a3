#include "worker/collectives/transport/grpc/grpc_transport.h"

#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"

namespace gradsync {

// ---------------------------------------------------------------- mailboxes

absl::Status JobMailbox::Push(DecodedFrame frame) {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  const int src = frame.header().rank();
  frames_[src].push_back(std::move(frame));
  return absl::OkStatus();
}

absl::StatusOr<DecodedFrame> JobMailbox::Pop(int src, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto ready = [this, src]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (!error_.ok()) return true;
    auto it = frames_.find(src);
    return it != frames_.end() && !it->second.empty();
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
    return absl::DeadlineExceededError(
        absl::StrCat("no data from rank ", src, " before the step timeout"));
  }
  if (!error_.ok()) return error_;
  auto& q = frames_[src];
  DecodedFrame f = std::move(q.front());
  q.pop_front();
  return f;
}

void JobMailbox::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (error_.ok()) error_ = status;
  frames_.clear();
}

std::shared_ptr<JobMailbox> PeerMailboxes::Open(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  auto& box = open_[job_id];
  if (!box) box = std::make_shared<JobMailbox>();
  if (closed_.count(job_id)) {
    box->Fail(absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " already ended on this worker")));
  }
  return box;
}

void PeerMailboxes::Close(const std::string& job_id, const absl::Status& why) {
  std::shared_ptr<JobMailbox> box;
  {
    absl::MutexLock lock(&mu_);
    closed_.insert(job_id);
    auto it = open_.find(job_id);
    if (it != open_.end()) {
      box = std::move(it->second);
      open_.erase(it);
    }
  }
  if (box) box->Fail(why);
}

absl::Status PeerMailboxes::Deliver(DecodedFrame frame) {
  std::shared_ptr<JobMailbox> box;
  {
    absl::MutexLock lock(&mu_);
    const std::string& id = frame.header().job_id();
    if (closed_.count(id)) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", id, " has ended on this worker"));
    }
    auto& b = open_[id];
    if (!b) b = std::make_shared<JobMailbox>();  // arrived before Open
    box = b;
  }
  return box->Push(std::move(frame));
}

void PeerMailboxes::SourceBroken(const std::string& job_id, int src) {
  std::shared_ptr<JobMailbox> box;
  {
    absl::MutexLock lock(&mu_);
    auto it = open_.find(job_id);
    if (it == open_.end()) return;
    box = it->second;
  }
  box->Fail(absl::UnavailableError(
      absl::StrCat("stream from rank ", src, " broke")));
}

// ---------------------------------------------------------------- server side

namespace {

class PeerReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit PeerReactor(PeerMailboxes* mailboxes) : mailboxes_(mailboxes) {
    StartRead(&buf_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);  // client half-closed (or cancelled)
      return;
    }
    absl::StatusOr<DecodedFrame> frame = DecodedFrame::Parse(buf_);
    absl::Status st = frame.status();
    if (st.ok()) {
      {
        // OnCancel may run concurrently with this reaction.
        absl::MutexLock lock(&mu_);
        if (job_id_.empty()) {
          job_id_ = frame->header().job_id();
          src_ = frame->header().rank();
        }
      }
      st = mailboxes_->Deliver(std::move(*frame));
    }
    buf_.Clear();
    if (!st.ok()) {
      Finish(ToGrpcStatus(st));
      return;
    }
    StartRead(&buf_);
  }

  void OnCancel() override {
    std::string job;
    int src;
    {
      absl::MutexLock lock(&mu_);
      job = job_id_;
      src = src_;
    }
    if (!job.empty()) mailboxes_->SourceBroken(job, src);
  }

  void OnDone() override { delete this; }

 private:
  PeerMailboxes* const mailboxes_;
  grpc::ByteBuffer buf_;  // the one read in flight
  absl::Mutex mu_;
  std::string job_id_ ABSL_GUARDED_BY(mu_);  // of the first frame
  int src_ ABSL_GUARDED_BY(mu_) = -1;
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* PeerService::Stream(
    grpc::CallbackServerContext*) {
  return new PeerReactor(mailboxes_);
}

// ---------------------------------------------------------------- client side

// One outgoing stream to one peer: a queue of frames, one write in flight.
class PeerSender final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  PeerSender(const std::string& target)
      : target_(target),
        channel_(MakeChannel(target, /*own_connection=*/true)),
        stub_(channel_) {}

  absl::Status Start(absl::Time deadline) {
    absl::Status st = WaitForConnected(channel_.get(), target_, deadline);
    if (!st.ok()) return st;
    stub_.PrepareBidiStreamingCall(&ctx_, "/gradsync.v1.Peer/Stream",
                                   grpc::StubOptions(), this);
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

  absl::Status Enqueue(grpc::ByteBuffer buf) {
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

  void OnWriteDone(bool ok) override {
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

  void OnReadDone(bool ok) override {}

  void OnDone(const grpc::Status& s) override {
    absl::MutexLock lock(&mu_);
    done_ = true;
    queue_.clear();
    error_ = s.ok() ? absl::FailedPreconditionError(
                          absl::StrCat("stream to ", target_, " closed"))
                    : absl::UnavailableError(absl::StrCat(
                          "stream to ", target_, " failed: ", s.error_message()));
  }

  // Half-closes after the queued frames and waits for the end of the call;
  // cancels it if that takes past `deadline`.
  void Close(absl::Time deadline) {
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
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithDeadline(absl::Condition(&done_), deadline)) return;
    }
    ctx_.TryCancel();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }

  void Cancel() { ctx_.TryCancel(); }

 private:
  const std::string target_;
  std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
  grpc::ClientContext ctx_;
  grpc::ByteBuffer ack_;
  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

namespace {

class FrameChunk final : public RecvChunk {
 public:
  explicit FrameChunk(DecodedFrame f) : f_(std::move(f)) {}
  size_t count() const override { return f_.count(); }
  uint64_t checksum() const override { return f_.header().checksum(); }
  void CopyTo(float* dst) const override { f_.CopyTo(dst); }
  void AddTo(float* dst) const override { f_.AddTo(dst); }

 private:
  DecodedFrame f_;
};

}  // namespace

GrpcTransport::GrpcTransport(std::string job_id, int rank,
                             std::vector<std::string> peer_addresses,
                             std::shared_ptr<JobMailbox> mailbox,
                             GrpcTransportOptions options)
    : job_id_(std::move(job_id)),
      rank_(rank),
      peers_(std::move(peer_addresses)),
      mailbox_(std::move(mailbox)),
      options_(options) {}

GrpcTransport::~GrpcTransport() {
  std::map<int, std::unique_ptr<PeerSender>> senders;
  {
    absl::MutexLock lock(&mu_);
    senders.swap(senders_);
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  for (auto& [peer, s] : senders) s->Close(deadline);
}

absl::StatusOr<PeerSender*> GrpcTransport::SenderFor(int peer) {
  {
    absl::MutexLock lock(&mu_);
    if (!aborted_.ok()) return aborted_;
    auto it = senders_.find(peer);
    if (it != senders_.end()) return it->second.get();
  }
  // Connect without holding mu_ so that Abort is never stuck behind it.
  // Only the collective's thread creates senders, so there is no race to
  // create the same one twice.
  auto sender = std::make_unique<PeerSender>(peers_[peer]);
  absl::Status st = sender->Start(absl::Now() + options_.connect_timeout);
  if (!st.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "rank ", rank_, " cannot reach rank ", peer, ": ", st.message()));
  }
  absl::MutexLock lock(&mu_);
  PeerSender* raw = sender.get();
  senders_[peer] = std::move(sender);
  if (!aborted_.ok()) {
    raw->Cancel();
    return aborted_;
  }
  return raw;
}

absl::Status GrpcTransport::Send(int peer, const ChunkTag& tag,
                                 const float* data, size_t n,
                                 uint64_t checksum) {
  if (peer < 0 || peer >= size()) {
    return absl::InvalidArgumentError(absl::StrCat("no rank ", peer));
  }
  absl::StatusOr<PeerSender*> sender = SenderFor(peer);
  if (!sender.ok()) return sender.status();
  TensorHeader h;
  h.set_kind(TensorHeader::CHUNK);
  h.set_job_id(job_id_);
  h.set_step(tag.step);
  h.set_rank(rank_);
  h.set_bucket(tag.bucket);
  h.set_phase(static_cast<int32_t>(tag.phase));
  h.set_index(tag.index);
  h.set_segment(tag.segment);
  h.set_checksum(checksum);
  // The payload is copied once into memory owned by the frame. gRPC 1.51 keeps
  // references to a stream's sent slices for an unpredictable while after
  // they went out (seen here: the last frames of a collective stay referenced
  // until later traffic), so lending it the caller's buffer would force
  // either a wait that can deadlock the ring or a reuse hazard. The receive
  // side stays zero-copy (reduced straight out of the received slices).
  auto copy = std::make_shared<const std::vector<float>>(data, data + n);
  grpc::ByteBuffer buf = EncodeFrameShared(h, std::move(copy), 0, n);
  return (*sender)->Enqueue(std::move(buf));
}

absl::StatusOr<std::unique_ptr<RecvChunk>> GrpcTransport::Recv(
    int peer, const ChunkTag& expected, size_t n, absl::Time deadline) {
  absl::StatusOr<DecodedFrame> f = mailbox_->Pop(peer, deadline);
  if (!f.ok()) {
    if (absl::IsDeadlineExceeded(f.status())) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", rank_, ": no data from rank ", peer, " (", peers_[peer],
          ") for ", expected.ToString(), " before the step timeout"));
    }
    return f.status();
  }
  const TensorHeader& h = f->header();
  ChunkTag got;
  got.step = h.step();
  got.bucket = h.bucket();
  got.phase = static_cast<RingPhase>(h.phase());  // may be no RingPhase
  got.index = h.index();
  got.segment = h.segment();
  if (!(got == expected) || f->count() != n) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", rank_, " expected ", expected.ToString(), " of ", n,
        " floats from rank ", peer, " but got ", got.ToString(), " of ",
        f->count(), "; not summed"));
  }
  return std::unique_ptr<RecvChunk>(new FrameChunk(std::move(*f)));
}

absl::Status GrpcTransport::WaitSendsReleased(absl::Time) {
  return absl::OkStatus();  // Send copies: the caller's memory is free at once.
}

void GrpcTransport::Abort(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (aborted_.ok()) aborted_ = status;
    for (auto& [peer, s] : senders_) s->Cancel();
  }
  mailbox_->Fail(status);
}

}  // namespace gradsync
