#include "worker/collectives/transport/grpc/grpc_transport.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/exception_status.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/job_secret.h"
#include "common/grpc/security.h"

namespace gradsync {

// ---------------------------------------------------------------- server side

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

// ---------------------------------------------------------------- client side

// One outgoing stream to one peer: a queue of frames, one write in flight.
class PeerSender final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // `creds` are presented when the stream opens (PeerReactor step 1).
  PeerSender(const std::string& target, const PeerCredentials& creds, bool bulk)
      : target_(target), channel_(MakePeerChannel(target, bulk)), stub_(channel_) {
    ctx_.AddMetadata(kJobIdMetadata, creds.job_id);
    ctx_.AddMetadata(kJobRankMetadata, std::to_string(creds.rank));
    ctx_.AddMetadata(kJobSecretMetadata, creds.secret);
    AddClusterToken(&ctx_);  // MakePeerChannel adds no interceptor
  }

  // `abandon`: WaitForConnected's (the transport was aborted).
  absl::Status Start(absl::Time deadline, const std::function<absl::Status()>& abandon) {
    absl::Status st = WaitForConnected(channel_.get(), target_, deadline, abandon);
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
  // cancels it if that takes past `deadline` on `env`'s clock.
  void Close(absl::Time deadline, const Env* env) {
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
      if (env->AwaitWithDeadline(&mu_, absl::Condition(&done_), deadline)) {
        return;
      }
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
  void SumTo(const float* a, float* out, float* out2) const override {
    f_.SumTo(a, out, out2);
  }
  const DecodedFrame& frame() const { return f_; }

 private:
  DecodedFrame f_;
};

}  // namespace

std::vector<std::string> SameHostBulkAddresses(
    const std::vector<std::string>& peer_addresses,
    const std::vector<std::string>& bulk_addresses, int rank) {
  std::vector<std::string> out(bulk_addresses.size());
  if (rank < 0 || static_cast<size_t>(rank) >= peer_addresses.size()) {
    return out;
  }
  const std::string here = AddressHost(peer_addresses[rank]);
  for (size_t i = 0; i < out.size() && i < peer_addresses.size(); ++i) {
    if (AddressHost(peer_addresses[i]) == here) out[i] = bulk_addresses[i];
  }
  return out;
}

GrpcTransport::GrpcTransport(std::string job_id, int rank,
                             std::vector<std::string> peer_addresses,
                             std::shared_ptr<JobMailbox> mailbox,
                             GrpcTransportOptions options)
    : job_id_(std::move(job_id)),
      rank_(rank),
      peers_(std::move(peer_addresses)),
      mailbox_(std::move(mailbox)),
      options_(options),
      pool_(BlockPool::Create(options.max_cached_send_bytes)) {}

GrpcTransport::~GrpcTransport() {
  std::map<std::pair<int, int>, std::unique_ptr<PeerSender>> senders;
  {
    absl::MutexLock lock(&mu_);
    senders.swap(senders_);
  }
  const absl::Time deadline = options_.env->Now() + absl::Seconds(5);
  for (auto& [key, s] : senders) s->Close(deadline, options_.env);
}

int GrpcTransport::Lane(const ChunkTag& tag) const {
  const int c = std::max(1, options_.connections_per_peer);
  const int stripe = c == 1 ? 0 : ((tag.segment % c) + c) % c;
  return bulk_ ? c + stripe : stripe;
}

void GrpcTransport::BeginCollective(size_t bytes) {
  bulk_ = options_.bulk_bytes > 0 && bytes >= options_.bulk_bytes;
}

absl::StatusOr<std::unique_ptr<PeerSender>> GrpcTransport::Connect(int peer, int lane) {
  const PeerCredentials creds{job_id_, rank_, options_.job_secret};
  const bool bulk = lane >= std::max(1, options_.connections_per_peer);
  const std::string bulk_target =
      bulk && static_cast<size_t>(peer) < options_.bulk_peer_addresses.size()
          ? options_.bulk_peer_addresses[peer]
          : "";
  // Abort (a cancelled job, an ended generation) ends a wait for a peer
  // that is gone at once, not after the connect timeout.
  const auto abandon = [this] {
    absl::MutexLock lock(&mu_);
    return aborted_;
  };
  if (!bulk_target.empty()) {
    auto sender = std::make_unique<PeerSender>(bulk_target, creds, true);
    absl::Status st = sender->Start(
        options_.env->Now() + std::min(kBulkConnectTimeout, options_.connect_timeout),
        abandon);
    if (st.ok()) return sender;
    if (!abandon().ok()) return abandon();
    spdlog::warn(
        "rank {}: rank {}'s bulk address {} does not answer ({}); its bulk "
        "lane {} goes to its peer address {} instead (slower for large "
        "tensors)",
        rank_, peer, bulk_target, std::string(st.message()), lane, peers_[peer]);
  }
  auto sender = std::make_unique<PeerSender>(peers_[peer], creds, false);
  absl::Status st =
      sender->Start(options_.env->Now() + options_.connect_timeout, abandon);
  if (!st.ok() && !abandon().ok()) return abandon();
  if (!st.ok()) {
    return absl::UnavailableError(
        absl::StrCat("rank ", rank_, " cannot reach rank ", peer, ": ", st.message()));
  }
  return sender;
}

absl::StatusOr<PeerSender*> GrpcTransport::SenderFor(int peer, int lane) {
  const std::pair<int, int> key{peer, lane};
  {
    absl::MutexLock lock(&mu_);
    if (!aborted_.ok()) return aborted_;
    auto it = senders_.find(key);
    if (it != senders_.end()) return it->second.get();
  }
  // Connect without holding mu_ so that Abort is never stuck behind it.
  // Only the collective's thread creates senders, so there is no race to
  // create the same one twice.
  absl::StatusOr<std::unique_ptr<PeerSender>> sender = Connect(peer, lane);
  if (!sender.ok()) return sender.status();
  absl::MutexLock lock(&mu_);
  PeerSender* raw = sender->get();
  senders_[key] = *std::move(sender);
  if (!aborted_.ok()) {
    raw->Cancel();
    return aborted_;
  }
  return raw;
}

TensorHeader GrpcTransport::Header(const ChunkTag& tag, uint64_t checksum) const {
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
  h.set_lane(Lane(tag));
  return h;
}

absl::Status GrpcTransport::Enqueue(int peer, const TensorHeader& h,
                                    grpc::ByteBuffer frame) {
  absl::StatusOr<PeerSender*> sender = SenderFor(peer, h.lane());
  if (!sender.ok()) return sender.status();
  return (*sender)->Enqueue(std::move(frame));
}

// Payloads go out of pooled blocks, never out of the caller's memory: gRPC
// 1.51 keeps references to a stream's sent slices for an unpredictable while
// after they went out (seen here: the last frames of a collective stay
// referenced until later traffic), so lending it the caller's buffer would
// force either a wait that can deadlock the ring or a reuse hazard.
absl::Status GrpcTransport::Send(int peer, const ChunkTag& tag, float* data, size_t n,
                                 uint64_t checksum) {
  if (peer < 0 || peer >= size()) {
    return absl::InvalidArgumentError(absl::StrCat("no rank ", peer));
  }
  const TensorHeader h = Header(tag, checksum);
  const WireDtype d = options_.wire_dtype;
  return Enqueue(peer, h, pool_->EncodeAs(h, d, n, [&](void* b) {
    EncodeWire(d, data, b, n);
    if (IsLossy(d)) DecodeWire(d, b, data, n);  // keep what was sent
  }));
}

absl::Status GrpcTransport::SendSum(int peer, const ChunkTag& tag, const float* a,
                                    const RecvChunk& chunk, float* store) {
  if (peer < 0 || peer >= size()) {
    return absl::InvalidArgumentError(absl::StrCat("no rank ", peer));
  }
  const TensorHeader h = Header(tag, 0);
  const WireDtype d = options_.wire_dtype;
  const size_t n = chunk.count();
  if (!IsLossy(d)) {
    return Enqueue(peer, h,
                   pool_->Encode(h, n, [&](float* b) { chunk.SumTo(a, b, store); }));
  }
  // Sum in float32, then narrow; `store` gets the narrowed values back.
  scratch_.resize(n);
  chunk.SumTo(a, scratch_.data(), nullptr);
  return Enqueue(peer, h, pool_->EncodeAs(h, d, n, [&](void* b) {
    EncodeWire(d, scratch_.data(), b, n);
    if (store != nullptr) DecodeWire(d, b, store, n);
  }));
}

absl::Status GrpcTransport::Forward(int peer, const ChunkTag& tag, const RecvChunk& chunk,
                                    uint64_t checksum) {
  if (peer < 0 || peer >= size()) {
    return absl::InvalidArgumentError(absl::StrCat("no rank ", peer));
  }
  const auto* received = dynamic_cast<const FrameChunk*>(&chunk);
  if (received == nullptr) return Transport::Forward(peer, tag, chunk, checksum);
  const TensorHeader h = Header(tag, checksum);
  return Enqueue(peer, h, received->frame().Reframe(h));
}

absl::StatusOr<std::unique_ptr<RecvChunk>> GrpcTransport::Recv(int peer,
                                                               const ChunkTag& expected,
                                                               size_t n,
                                                               absl::Time deadline) {
  absl::StatusOr<DecodedFrame> f = mailbox_->Pop(peer, Lane(expected), deadline);
  if (!f.ok()) {
    if (absl::IsDeadlineExceeded(f.status())) {
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank_, ": no data from rank ", peer, " (", peers_[peer],
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
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank_, " expected ", expected.ToString(), " of ", n,
                     " floats from rank ", peer, " but got ", got.ToString(), " of ",
                     f->count(), "; not summed"));
  }
  return std::unique_ptr<RecvChunk>(new FrameChunk(std::move(*f)));
}

absl::Status GrpcTransport::WaitSendsReleased(absl::Time) {
  return absl::OkStatus();  // sends never lend the caller's memory
}

void GrpcTransport::Abort(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (aborted_.ok()) aborted_ = status;
    for (auto& [key, s] : senders_) s->Cancel();
  }
  mailbox_->Fail(status);
}

}  // namespace gradsync
