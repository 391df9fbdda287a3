// Transport over gRPC, cut as Gloo cuts a transport: each rank serves the
// Peer service (peer_service.h), whose streams deliver a job's frames into
// that job's mailbox (peer_mailboxes.h), one bounded FIFO per sending rank;
// each destination gets a sender (peer_sender.h), one client stream per
// lane; and GrpcTransport below is the Transport the collectives call, which
// owns the senders and reads its mailbox. Frames are reduced straight out
// of the received slices. Payloads are written once, into pooled send
// blocks (a copy for Send, the reduction's output for SendSum); Forward
// re-sends received slices without touching the data.
//
// Every stream is authenticated when it opens: its metadata names the job,
// the sending rank and the job's secret (GrpcTransportOptions.job_secret),
// and the receiving worker admits it only into a job it runs, with that
// job's secret and one of its ranks (PeerMailboxes::Admit). Each frame's
// header must then name the same job and rank, else the stream ends with
// PERMISSION_DENIED and the frame is not delivered.
#ifndef GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_GRPC_TRANSPORT_H_
#define GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_GRPC_TRANSPORT_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/grpc/block_pool.h"
#include "common/grpc/tensor_frame.h"
#include "worker/collectives/transport.h"
#include "worker/collectives/transport/grpc/peer_mailboxes.h"
#include "worker/collectives/transport/grpc/peer_sender.h"
#include "worker/collectives/transport/grpc/peer_service.h"

namespace gradsync {

struct GrpcTransportOptions {
  absl::Duration connect_timeout = absl::Seconds(10);
  // TCP connections (one HTTP/2 stream each) to every peer; a message goes
  // on lane tag.segment % connections_per_peer. Equal on all ranks of a job.
  int connections_per_peer = 1;
  // Returned send blocks kept for reuse.
  size_t max_cached_send_bytes = size_t{64} << 20;
  // Element format of sent frames. Equal on all ranks of a job.
  WireDtype wire_dtype = WireDtype::kFp32;
  // The job's secret (Assignment.job_secret): presented when a stream
  // opens; the receivers opened the job with the same one.
  std::string job_secret;
  // Bulk lanes (common/grpc/grpc_util.h "Bulk connections"): a collective of
  // at least `bulk_bytes` bytes (Transport::BeginCollective) sends on lanes
  // connections_per_peer .. 2*connections_per_peer-1, to the peers' bulk
  // addresses (by rank). 0: never. Equal on all ranks of a job. A peer with
  // no bulk address ("", or none listed), or whose bulk address cannot be
  // reached within kBulkConnectTimeout, gets its bulk lanes on connections
  // to its peer address instead (a warning says so): slower, never wrong,
  // since receivers sort frames by the lane their header names.
  size_t bulk_bytes = 0;
  std::vector<std::string> bulk_peer_addresses;
  // The clock of connect and close deadlines (not owned, outlives the
  // transport). They also go to gRPC, so it must keep real time (a fake
  // clock belongs on the in-process transport).
  const Env* env = Env::Default();
};

inline constexpr absl::Duration kBulkConnectTimeout = absl::Seconds(3);

// The bulk addresses a rank should use: `bulk_addresses` (by rank) where the
// peer's address names the same host as `rank`'s own, "" elsewhere. Bulk
// lanes pay off where the CPU and memory, not a link, limit a transfer; across
// a link, their fixed 64 KiB window is too small for the link's
// bandwidth-delay product (a 64 MiB ring allreduce on emulated 1 Gbit hosts
// took 7 % longer on them; docs/lab-notes/bulk-connections.md).
std::vector<std::string> SameHostBulkAddresses(
    const std::vector<std::string>& peer_addresses,
    const std::vector<std::string>& bulk_addresses, int rank);

// Transport of one rank in one job. Send/Recv from one thread at a time;
// Abort from any thread.
class GrpcTransport final : public Transport {
 public:
  GrpcTransport(std::string job_id, int rank, std::vector<std::string> peer_addresses,
                std::shared_ptr<JobMailbox> mailbox, GrpcTransportOptions options = {});
  ~GrpcTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(peers_.size()); }
  WireDtype wire_dtype() const override { return options_.wire_dtype; }
  absl::Status Send(int peer, const ChunkTag& tag, float* data, size_t n,
                    uint64_t checksum) override;
  absl::Status SendSum(int peer, const ChunkTag& tag, const float* a,
                       const RecvChunk& chunk, float* store) override;
  absl::Status Forward(int peer, const ChunkTag& tag, const RecvChunk& chunk,
                       uint64_t checksum) override;
  absl::StatusOr<std::unique_ptr<RecvChunk>> Recv(int peer, const ChunkTag& expected,
                                                  size_t n, absl::Time deadline) override;
  absl::Status WaitSendsReleased(absl::Time deadline) override;
  void Abort(const absl::Status& status) override;
  void BeginCollective(size_t bytes) override;

  // Send blocks allocated so far (tests check that they are reused).
  int64_t send_block_allocations() const { return pool_->allocations(); }

 private:
  int Lane(const ChunkTag& tag) const;
  absl::StatusOr<PeerSender*> SenderFor(int peer, int lane);
  // A started stream for `lane` to `peer`: on its bulk address for a bulk
  // lane when it has one that answers, else on its peer address.
  absl::StatusOr<std::unique_ptr<PeerSender>> Connect(int peer, int lane);
  TensorHeader Header(const ChunkTag& tag, uint64_t checksum) const;
  absl::Status Enqueue(int peer, const TensorHeader& h, grpc::ByteBuffer frame);

  const std::string job_id_;
  const int rank_;
  const std::vector<std::string> peers_;
  const std::shared_ptr<JobMailbox> mailbox_;
  const GrpcTransportOptions options_;
  const std::shared_ptr<BlockPool> pool_;

  absl::Mutex mu_;
  // By (peer, lane).
  std::map<std::pair<int, int>, std::unique_ptr<PeerSender>> senders_
      ABSL_GUARDED_BY(mu_);
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  // SendSum's float32 sums before a 16-bit encoding (collective thread only).
  std::vector<float> scratch_;
  // Whether the current collective uses the bulk lanes (collective thread).
  bool bulk_ = false;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_GRPC_TRANSPORT_H_
