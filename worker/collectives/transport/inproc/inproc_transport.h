// Transport between threads of one process: for tests of the collectives
// and for benchmarks that separate algorithm cost from gRPC cost.
#ifndef GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_INPROC_INPROC_TRANSPORT_H_
#define GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_INPROC_INPROC_TRANSPORT_H_

#include <deque>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "worker/collectives/transport.h"

namespace gradsync {

// Shared mailboxes of a group of `size` in-process ranks. Thread-safe.
class InProcGroup {
 public:
  // Messages travel as `dtype` would on a network: Send rounds the values
  // to it (the in-process queue itself keeps float32). Receives wait on
  // `env`'s clock (not owned, outlives the group).
  explicit InProcGroup(int size, WireDtype dtype = WireDtype::kFp32,
                       const Env* env = Env::Default());
  int size() const { return size_; }
  WireDtype dtype() const { return dtype_; }
  // The transport of `rank`; owned by the group.
  Transport* transport(int rank);

 private:
  friend class InProcTransport;
  struct Message {
    ChunkTag tag;
    std::vector<float> data;  // copied at Send: the sender may reuse memory
    uint64_t checksum;
  };
  struct Mailbox {  // messages from one source to one destination
    std::deque<Message> queue;
  };
  const int size_;
  const WireDtype dtype_;
  const Env* const env_;
  absl::Mutex mu_;
  std::vector<std::vector<Mailbox>> boxes_ ABSL_GUARDED_BY(mu_);  // [dst][src]
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Transport>> transports_;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_INPROC_INPROC_TRANSPORT_H_
