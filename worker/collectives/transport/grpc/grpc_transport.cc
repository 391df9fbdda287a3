#include "worker/collectives/transport/grpc/grpc_transport.h"

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/spec/peer_blame.h"

namespace gradsync {
namespace {

// A received frame as the collectives read it.
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
        abandon, options_.env);
    if (st.ok()) return sender;
    if (!abandon().ok()) return abandon();
    spdlog::warn(
        "rank {}: rank {}'s bulk address {} does not answer ({}); its bulk "
        "lane {} goes to its peer address {} instead (slower for large "
        "tensors)",
        rank_, peer, bulk_target, std::string(st.message()), lane, peers_[peer]);
  }
  auto sender = std::make_unique<PeerSender>(peers_[peer], creds, false);
  absl::Status st = sender->Start(options_.env->Now() + options_.connect_timeout, abandon,
                                  options_.env);
  if (!st.ok() && !abandon().ok()) return abandon();
  if (!st.ok()) {
    return absl::UnavailableError(
        absl::StrCat(CannotReachPeerText(rank_, peer), ": ", st.message()));
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
          absl::StrCat(NoDataFromPeerText(rank_, peer), " (", peers_[peer], ") for ",
                       expected.ToString(), " before the step timeout"));
    }
    return f.status();
  }
  const TensorHeader& h = f->header();
  ChunkTag got;
  got.step = h.step();
  got.bucket = h.bucket();
  got.phase = static_cast<CollectivePhase>(h.phase());  // may be no CollectivePhase
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
