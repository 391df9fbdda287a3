#include "worker/sync/ps_partition_calls.h"

#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/security.h"
#include "common/grpc/tensor_frame.h"

namespace gradsync {

namespace {

// `st` (not OK) from `partition`'s shard, naming both.
absl::Status FromPartition(const PsPartitionRef& partition, const absl::Status& st) {
  return absl::Status(st.code(), absl::StrCat("PS shard ", partition.address, " (",
                                              partition.key, "): ", st.message()));
}

// `st` (not OK) from the shard at `address`, naming it.
absl::Status FromShard(const std::string& address, const absl::Status& st) {
  return absl::Status(st.code(), absl::StrCat("PS shard ", address, ": ", st.message()));
}

// One async unary call per partition; gRPC ends each at its deadline.
class UnaryCalls final : public PsPartitionCalls {
 public:
  UnaryCalls(size_t n, std::string method, const PsCredentials* creds,
             std::function<grpc::GenericStub*(const std::string&)> stub_for)
      : PsPartitionCalls(n),
        method_(std::move(method)),
        creds_(creds),
        stub_for_(std::move(stub_for)),
        ctx_(n),
        req_(n),
        out_(n) {}

  void Start(size_t i, const PsPartitionRef& partition, grpc::ByteBuffer request,
             absl::Time deadline) override {
    ctx_[i].set_deadline(ToChrono(deadline));
    AddPsCredentials(*creds_, &ctx_[i]);
    AddClusterToken(&ctx_[i]);  // MakePsDataChannel adds no interceptor
    req_[i] = std::move(request);
    stub_for_(partition.address)
        ->UnaryCall(&ctx_[i], method_, grpc::StubOptions(), &req_[i], &out_[i],
                    [this, i, &partition](grpc::Status s) {
                      absl::Status st;
                      if (!s.ok()) st = FromPartition(partition, FromGrpcStatus(s));
                      Finish(i, std::move(st), std::move(out_[i]));
                    });
  }

  // (Calls not started yet are cancelled as they start.)
  void CancelAll(const absl::Status&) override {
    for (auto& c : ctx_) c.TryCancel();  // each call then ends promptly
  }

  absl::Duration grace() const override { return kPsCallGrace; }

 private:
  const std::string method_;
  const PsCredentials* const creds_;
  const std::function<grpc::GenericStub*(const std::string&)> stub_for_;
  std::vector<grpc::ClientContext> ctx_;
  std::vector<grpc::ByteBuffer> req_, out_;
};

// PushPull over the client's push streams (ps_stream.h), one per shard:
// a partition's call is its GRAD frame written on its shard's stream, answered
// when that stream brings back a frame naming the partition's slice. A stream
// that ends fails every partition still waiting on it. No deadline travels
// with a frame: the caller cancels at the deadline (grace() is zero).
class StreamCalls final : public PsPartitionCalls {
 public:
  StreamCalls(size_t n, PsStreamFor stream_for)
      : PsPartitionCalls(n), stream_for_(std::move(stream_for)) {}

  ~StreamCalls() override {
    // Answers after this (none are expected) are dropped by the streams.
    for (auto& [address, sink] : sinks_) sink->stream->Attach(nullptr);
  }

  void Start(size_t i, const PsPartitionRef& partition, grpc::ByteBuffer request,
             absl::Time) override {
    absl::StatusOr<Sink*> sink = SinkFor(partition.address);
    if (!sink.ok()) {
      Finish(i, FromPartition(partition, sink.status()), {});
      return;
    }
    if (!(*sink)->Expect(partition, i)) {
      Finish(i,
             FromPartition(partition, absl::InvalidArgumentError(
                                          "partition listed twice in one push")),
             {});
      return;
    }
    absl::Status st = (*sink)->stream->Write(std::move(request));
    if (!st.ok()) (*sink)->Lost(partition.key, st);
  }

  void CancelAll(const absl::Status& why) override {
    std::vector<std::shared_ptr<PsPushStream>> streams;
    {
      absl::MutexLock lock(&mu_);
      if (why_.ok()) why_ = why;
      for (auto& [address, sink] : sinks_) streams.push_back(sink->stream);
    }
    // Each stream's end reaches its sink, which fails the waiting partitions.
    for (auto& s : streams) s->Cancel();
  }

  absl::Duration grace() const override { return absl::ZeroDuration(); }

 private:
  // The partitions waiting on one stream, by slice key.
  struct Sink final : PsStreamSink {
    Sink(StreamCalls* owner, std::shared_ptr<PsPushStream> s)
        : owner(owner), stream(std::move(s)) {}

    // False when the partition waits already (listed twice in one call).
    bool Expect(const PsPartitionRef& partition, size_t i) {
      absl::MutexLock lock(&mu);
      return waiting.emplace(partition.key, Waiter{&partition, i}).second;
    }
    // The partition's frame could not be written.
    void Lost(const std::string& key, const absl::Status& st) {
      std::optional<Waiter> w = Take(key);
      if (w) owner->Finish(w->i, FromPartition(*w->partition, st), {});
    }
    // (The stream ends itself on a frame that does not parse.)
    void Answered(grpc::ByteBuffer frame) override {
      absl::StatusOr<DecodedFrame> f = DecodedFrame::Parse(frame);
      if (!f.ok()) return;
      std::optional<Waiter> w = Take(f->header().job_id());
      if (w) owner->Finish(w->i, absl::OkStatus(), std::move(frame));
    }
    void Ended(const absl::Status& why) override {
      std::map<std::string, Waiter> left;
      {
        absl::MutexLock lock(&mu);
        left.swap(waiting);
      }
      // The stream's end concerns the stream, not one partition: name the
      // shard only (a shard's error names the slice it is about).
      const absl::Status cause = owner->Cause(why);
      for (auto& [key, w] : left) {
        owner->Finish(w.i, FromShard(w.partition->address, cause), {});
      }
    }

    struct Waiter {
      const PsPartitionRef* partition;
      size_t i;
    };
    std::optional<Waiter> Take(const std::string& key) {
      absl::MutexLock lock(&mu);
      auto it = waiting.find(key);
      if (it == waiting.end()) return std::nullopt;
      Waiter w = it->second;
      waiting.erase(it);
      return w;
    }

    StreamCalls* const owner;
    const std::shared_ptr<PsPushStream> stream;
    absl::Mutex mu;
    std::map<std::string, Waiter> waiting ABSL_GUARDED_BY(mu);
  };

  // Why a stream's partitions failed: the caller's reason when it cancelled.
  absl::Status Cause(const absl::Status& stream_end) {
    absl::MutexLock lock(&mu_);
    return why_.ok() ? stream_end : why_;
  }

  // The sink of `address`'s stream, attached on first use (this thread
  // only creates sinks).
  absl::StatusOr<Sink*> SinkFor(const std::string& address) {
    {
      absl::MutexLock lock(&mu_);
      auto it = sinks_.find(address);
      if (it != sinks_.end()) return it->second.get();
    }
    absl::StatusOr<std::shared_ptr<PsPushStream>> stream = stream_for_(address);
    if (!stream.ok()) return stream.status();
    auto sink = std::make_unique<Sink>(this, *std::move(stream));
    Sink* raw = sink.get();
    {
      absl::MutexLock lock(&mu_);
      sinks_[address] = std::move(sink);
    }
    // Not under mu_: a stream that ended already tells the sink at once.
    raw->stream->Attach(raw);
    return raw;
  }

  const PsStreamFor stream_for_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Sink>> sinks_ ABSL_GUARDED_BY(mu_);
  absl::Status why_ ABSL_GUARDED_BY(mu_);  // the first CancelAll's reason
};

}  // namespace

std::unique_ptr<PsPartitionCalls> MakeUnaryCalls(
    size_t n, std::string method, const PsCredentials* creds,
    std::function<grpc::GenericStub*(const std::string&)> stub_for) {
  return std::make_unique<UnaryCalls>(n, std::move(method), creds, std::move(stub_for));
}

std::unique_ptr<PsPartitionCalls> MakeStreamCalls(size_t n, PsStreamFor stream_for) {
  return std::make_unique<StreamCalls>(n, std::move(stream_for));
}

}  // namespace gradsync
