#include "worker/collectives/transport/inproc/inproc_transport.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/kernels.h"

namespace gradsync {

class InProcTransport final : public Transport {
 public:
  InProcTransport(InProcGroup* group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  WireDtype wire_dtype() const override { return group_->dtype(); }

  absl::Status Send(int peer, const ChunkTag& tag, float* data, size_t n,
                    uint64_t checksum) override {
    RoundToWire(group_->dtype(), data, n);
    absl::MutexLock lock(&group_->mu_);
    if (!group_->aborted_.ok()) return group_->aborted_;
    group_->boxes_[peer][rank_].queue.push_back(
        {tag, std::vector<float>(data, data + n), checksum});
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<RecvChunk>> Recv(int peer, const ChunkTag& expected,
                                                  size_t n,
                                                  absl::Time deadline) override {
    absl::MutexLock lock(&group_->mu_);
    auto& q = group_->boxes_[rank_][peer].queue;
    auto ready = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return !q.empty() || !group_->aborted_.ok();
    };
    while (!ready()) {
      if (group_->env_->AwaitWithDeadline(&group_->mu_, absl::Condition(&ready),
                                          deadline)) {
        break;
      }
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", rank_, ": nothing from rank ", peer, " for ", expected.ToString()));
    }
    if (!group_->aborted_.ok()) return group_->aborted_;
    InProcGroup::Message m = std::move(q.front());
    q.pop_front();
    if (!(m.tag == expected) || m.data.size() != n) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", rank_, " expected ", expected.ToString(), " of ", n,
          " floats from rank ", peer, ", got ", m.tag.ToString(), " of ", m.data.size()));
    }
    return std::unique_ptr<RecvChunk>(new Chunk(std::move(m)));
  }

  absl::Status WaitSendsReleased(absl::Time) override {
    return absl::OkStatus();  // Send copies.
  }

  void Abort(const absl::Status& status) override {
    absl::MutexLock lock(&group_->mu_);
    if (group_->aborted_.ok()) group_->aborted_ = status;
  }

 private:
  class Chunk final : public RecvChunk {
   public:
    explicit Chunk(InProcGroup::Message m) : m_(std::move(m)) {}
    size_t count() const override { return m_.data.size(); }
    uint64_t checksum() const override { return m_.checksum; }
    void CopyTo(float* dst) const override {
      if (!m_.data.empty()) std::memcpy(dst, m_.data.data(), m_.data.size() * 4);
    }
    void AddTo(float* dst) const override {
      AddInto(dst, m_.data.data(), m_.data.size());
    }
    void SumTo(const float* a, float* out, float* out2) const override {
      SumIntoUnaligned(out, out2, a, m_.data.data(), m_.data.size());
    }

   private:
    InProcGroup::Message m_;
  };

  InProcGroup* const group_;
  const int rank_;
};

InProcGroup::InProcGroup(int size, WireDtype dtype, const Env* env)
    : size_(size), dtype_(dtype), env_(env) {
  {
    absl::MutexLock lock(&mu_);
    boxes_.assign(size, std::vector<Mailbox>(size));
  }
  for (int r = 0; r < size; ++r) {
    transports_.push_back(std::make_unique<InProcTransport>(this, r));
  }
}

Transport* InProcGroup::transport(int rank) { return transports_[rank].get(); }

}  // namespace gradsync
