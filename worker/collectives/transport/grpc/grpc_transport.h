// Transport over gRPC: each rank serves the Peer service; frames for a job
// land in that job's mailbox, one FIFO per sending rank, and are reduced
// straight out of the received slices. Sending opens one client stream per
// destination; each frame's payload is copied once into frame-owned memory
// (see Send for why), the frame header and the memory travel as raw slices.
#ifndef GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_GRPC_TRANSPORT_H_
#define GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_GRPC_TRANSPORT_H_

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc/tensor_frame.h"
#include "gradsync/v1/gradsync.grpc.pb.h"
#include "worker/collectives/transport.h"

namespace gradsync {

// Received frames of one job, by sending rank. Thread-safe.
// (Sending copies the payload once; see GrpcTransport::Send.)
class JobMailbox {
 public:
  // Appends a frame; the mailbox's error if it has failed.
  absl::Status Push(DecodedFrame frame);
  // Oldest frame from `src`; DEADLINE_EXCEEDED, or the failure status.
  absl::StatusOr<DecodedFrame> Pop(int src, absl::Time deadline);
  // Makes pending and future Pops fail with `status` (first failure wins).
  void Fail(const absl::Status& status);

 private:
  absl::Mutex mu_;
  std::map<int, std::deque<DecodedFrame>> frames_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

// The mailboxes of all jobs on this worker. Thread-safe.
class PeerMailboxes {
 public:
  // The job's mailbox (frames that arrived before Open are kept).
  std::shared_ptr<JobMailbox> Open(const std::string& job_id);
  // Fails the job's mailbox and rejects later frames for it.
  void Close(const std::string& job_id, const absl::Status& why);
  // Routes a frame by its header's job id. FAILED_PRECONDITION for a job that
  // has ended here.
  absl::Status Deliver(DecodedFrame frame);
  // Fails the mailbox of `job_id` because rank `src`'s stream broke.
  void SourceBroken(const std::string& job_id, int src);

 private:
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<JobMailbox>> open_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> closed_ ABSL_GUARDED_BY(mu_);
};

// The Peer service: one reactor per incoming stream, one read in flight.
class PeerService final
    : public v1::Peer::WithRawCallbackMethod_Stream<v1::Peer::Service> {
 public:
  explicit PeerService(PeerMailboxes* mailboxes) : mailboxes_(mailboxes) {}
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Stream(
      grpc::CallbackServerContext* ctx) override;

 private:
  PeerMailboxes* const mailboxes_;
};

class PeerSender;

struct GrpcTransportOptions {
  absl::Duration connect_timeout = absl::Seconds(10);
};

// Transport of one rank in one job. Send/Recv from one thread at a time;
// Abort from any thread.
class GrpcTransport final : public Transport {
 public:
  GrpcTransport(std::string job_id, int rank,
                std::vector<std::string> peer_addresses,
                std::shared_ptr<JobMailbox> mailbox,
                GrpcTransportOptions options = {});
  ~GrpcTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(peers_.size()); }
  absl::Status Send(int peer, const ChunkTag& tag, const float* data, size_t n,
                    uint64_t checksum) override;
  absl::StatusOr<std::unique_ptr<RecvChunk>> Recv(int peer,
                                                  const ChunkTag& expected,
                                                  size_t n,
                                                  absl::Time deadline) override;
  absl::Status WaitSendsReleased(absl::Time deadline) override;
  void Abort(const absl::Status& status) override;

 private:
  absl::StatusOr<PeerSender*> SenderFor(int peer);

  const std::string job_id_;
  const int rank_;
  const std::vector<std::string> peers_;
  const std::shared_ptr<JobMailbox> mailbox_;
  const GrpcTransportOptions options_;

  absl::Mutex mu_;
  std::map<int, std::unique_ptr<PeerSender>> senders_ ABSL_GUARDED_BY(mu_);
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_GRPC_TRANSPORT_H_
