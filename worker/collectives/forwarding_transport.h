// A Transport that passes every call on to another one: the base of
// decorators that observe a transport (worker/metrics/metered_transport.h,
// worker/sync/stall_transport.h) and override only the calls they watch.
// One place forwards everything, so a method added to Transport (as
// wire_dtype() was) cannot be missed by a decorator and silently fall back
// to Transport's default.
#ifndef GRADSYNC_WORKER_COLLECTIVES_FORWARDING_TRANSPORT_H_
#define GRADSYNC_WORKER_COLLECTIVES_FORWARDING_TRANSPORT_H_

#include <memory>

#include "worker/collectives/transport.h"

namespace gradsync {

// Threading: as the wrapped transport's. Does not own `inner`, which must
// outlive it.
class ForwardingTransport : public Transport {
 public:
  explicit ForwardingTransport(Transport* inner) : inner_(inner) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  WireDtype wire_dtype() const override { return inner_->wire_dtype(); }
  absl::Status Send(int peer, const ChunkTag& tag, float* data, size_t n,
                    uint64_t checksum) override {
    return inner_->Send(peer, tag, data, n, checksum);
  }
  absl::Status SendSum(int peer, const ChunkTag& tag, const float* a,
                       const RecvChunk& chunk, float* store) override {
    return inner_->SendSum(peer, tag, a, chunk, store);
  }
  absl::Status Forward(int peer, const ChunkTag& tag, const RecvChunk& chunk,
                       uint64_t checksum) override {
    return inner_->Forward(peer, tag, chunk, checksum);
  }
  absl::StatusOr<std::unique_ptr<RecvChunk>> Recv(int peer, const ChunkTag& expected,
                                                  size_t n,
                                                  absl::Time deadline) override {
    return inner_->Recv(peer, expected, n, deadline);
  }
  absl::Status WaitSendsReleased(absl::Time deadline) override {
    return inner_->WaitSendsReleased(deadline);
  }
  void Abort(const absl::Status& status) override { inner_->Abort(status); }
  void BeginCollective(size_t bytes) override { inner_->BeginCollective(bytes); }

 protected:
  Transport* inner() const { return inner_; }

 private:
  Transport* const inner_;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_FORWARDING_TRANSPORT_H_
