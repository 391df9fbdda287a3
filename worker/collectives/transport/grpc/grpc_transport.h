// Transport over gRPC: each rank serves the Peer service; frames for a job
// land in that job's mailbox, one bounded FIFO per sending rank, and are
// reduced straight out of the received slices. Sending opens one client
// stream per destination. Payloads are written once, into pooled send blocks
// (a copy for Send, the reduction's output for SendSum); Forward re-sends
// received slices without touching the data.
//
// Flow control: a mailbox holds at most kMailboxFrames frames or
// kMailboxBytes bytes per source; beyond that the stream's reactor stops
// reading until the collective consumes one, so HTTP/2 flow control holds
// the sender back. Frames for a job this worker has not opened yet (its
// assignment may arrive after a peer's first frame) park their stream, at
// most kMaxParkedStreams of them, for at most kParkedGrace; frames for a job
// that ended are refused.
#ifndef GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_GRPC_TRANSPORT_H_
#define GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_GRPC_TRANSPORT_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/grpc/block_pool.h"
#include "common/grpc/tensor_frame.h"
#include "gradsync/v1/gradsync.grpc.pb.h"
#include "worker/collectives/transport.h"

namespace gradsync {

inline constexpr size_t kMailboxFrames = 16;
inline constexpr size_t kMailboxBytes = size_t{32} << 20;
inline constexpr size_t kMaxParkedStreams = 256;
inline constexpr absl::Duration kParkedGrace = absl::Seconds(60);
// Ended jobs remembered (to refuse their late frames), oldest forgotten first.
inline constexpr size_t kMaxClosedJobs = 4096;

// Called once to let a parked stream go on: OK to read its next frame, an
// error to end the stream with it. May run on any thread.
using Resume = std::function<void(const absl::Status&)>;

// What Push did with a frame.
enum class Delivery {
  kTaken,   // read the next frame
  kParked,  // do not read until `resume` runs
};

// Received frames of one job, by sending rank and lane (the connection they
// came on: FIFO order holds per connection only). Thread-safe.
class JobMailbox {
 public:
  // Appends a frame. kParked when the source's queue is full: `resume` runs
  // once a Pop made room (or with the error when the mailbox fails). The
  // mailbox's error if it has failed.
  absl::StatusOr<Delivery> Push(DecodedFrame frame, Resume resume);
  // Oldest frame from `src` on `lane`; DEADLINE_EXCEEDED, or the failure
  // status.
  absl::StatusOr<DecodedFrame> Pop(int src, int lane, absl::Time deadline);
  // Makes pending and future Pops fail with `status` (first failure wins);
  // parked streams are resumed with it.
  void Fail(const absl::Status& status);

 private:
  struct Source {
    std::deque<DecodedFrame> frames;
    size_t bytes = 0;
    Resume parked;  // set while the source's stream waits for room
  };
  absl::Mutex mu_;
  std::map<std::pair<int, int>, Source> sources_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

// The mailboxes of all jobs on this worker. Thread-safe.
class PeerMailboxes {
 public:
  // The job's mailbox; frames parked for it are delivered now.
  std::shared_ptr<JobMailbox> Open(const std::string& job_id);
  // Fails the job's mailbox and refuses later frames for it.
  void Close(const std::string& job_id, const absl::Status& why);
  // Routes a frame by its header's job id. FAILED_PRECONDITION for a job that
  // has ended here; RESOURCE_EXHAUSTED when too many streams wait for jobs
  // not opened yet.
  absl::StatusOr<Delivery> Deliver(DecodedFrame frame, Resume resume);
  // Fails the mailbox of `job_id` because rank `src`'s stream broke.
  void SourceBroken(const std::string& job_id, int src);
  // Streams parked for jobs not opened yet (for tests).
  size_t parked() const;

 private:
  struct Parked {
    DecodedFrame frame;
    Resume resume;
    absl::Time since;
  };
  // Refuses parked frames older than kParkedGrace; returns their resumes.
  std::vector<Resume> ExpireParked(absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<JobMailbox>> open_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> closed_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> closed_order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<Parked>> parked_ ABSL_GUARDED_BY(mu_);
  size_t parked_count_ ABSL_GUARDED_BY(mu_) = 0;
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
  // TCP connections (one HTTP/2 stream each) to every peer; a message goes
  // on lane tag.segment % connections_per_peer. Equal on all ranks of a job.
  int connections_per_peer = 1;
  // Returned send blocks kept for reuse.
  size_t max_cached_send_bytes = size_t{64} << 20;
  // Element format of sent frames. Equal on all ranks of a job.
  WireDtype wire_dtype = WireDtype::kFp32;
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
  WireDtype wire_dtype() const override { return options_.wire_dtype; }
  absl::Status Send(int peer, const ChunkTag& tag, float* data, size_t n,
                    uint64_t checksum) override;
  absl::Status SendSum(int peer, const ChunkTag& tag, const float* a,
                       const RecvChunk& chunk, float* store) override;
  absl::Status Forward(int peer, const ChunkTag& tag, const RecvChunk& chunk,
                       uint64_t checksum) override;
  absl::StatusOr<std::unique_ptr<RecvChunk>> Recv(int peer,
                                                  const ChunkTag& expected,
                                                  size_t n,
                                                  absl::Time deadline) override;
  absl::Status WaitSendsReleased(absl::Time deadline) override;
  void Abort(const absl::Status& status) override;

  // Send blocks allocated so far (tests check that they are reused).
  int64_t send_block_allocations() const { return pool_->allocations(); }

 private:
  int Lane(const ChunkTag& tag) const;
  absl::StatusOr<PeerSender*> SenderFor(int peer, int lane);
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
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_GRPC_TRANSPORT_H_
