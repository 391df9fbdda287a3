// The gRPC transport's bounds and data path: bounded mailboxes that hold
// streams back, send blocks reused, SendSum and Forward over real streams.
// (Admission of streams: peer_admission_test.cc.)
#include "worker/collectives/transport/grpc/grpc_transport.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/grpc/block_pool.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/tensor_frame.h"
#include "worker/collectives/ring.h"
#include "worker/collectives/testing/transport_group.h"

namespace gradsync {
namespace {

DecodedFrame Frame(const std::string& job, int src, int segment, size_t n,
                   float value = 1.0f) {
  std::vector<float> data(n, value);
  TensorHeader h;
  h.set_job_id(job);
  h.set_rank(src);
  h.set_segment(segment);
  grpc::ByteBuffer buf = EncodeFrame(h, data.data(), n, nullptr);
  grpc::Slice single;
  EXPECT_TRUE(buf.DumpToSingleSlice(&single).ok());  // detach from `data`
  grpc::ByteBuffer copy(&single, 1);
  absl::StatusOr<DecodedFrame> f = DecodedFrame::Parse(copy);
  EXPECT_TRUE(f.ok()) << f.status();
  return std::move(*f);
}

// Counts resumes and remembers the last status.
struct ResumeLog {
  std::atomic<int> ok{0};
  std::atomic<int> errors{0};
  Resume Make() {
    return [this](const absl::Status& st) { (st.ok() ? ok : errors)++; };
  }
};

TEST(JobMailbox, ParksTheSourceWhenFullAndResumesItOnPop) {
  JobMailbox box;
  ResumeLog log;
  for (size_t i = 0; i + 1 < kMailboxFrames; ++i) {
    auto d = box.Push(Frame("j", 2, i, 4), log.Make());
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, Delivery::kTaken) << i;
  }
  auto last = box.Push(Frame("j", 2, kMailboxFrames - 1, 4), log.Make());
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, Delivery::kParked);
  // Another source is not held back by the full one.
  auto other = box.Push(Frame("j", 3, 0, 4), log.Make());
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(*other, Delivery::kTaken);
  EXPECT_EQ(log.ok.load(), 0);
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  auto first = box.Pop(2, 0, deadline);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->header().segment(), 0);  // FIFO per source
  EXPECT_EQ(log.ok.load(), 1);              // room again: the stream reads on
  for (size_t i = 1; i < kMailboxFrames; ++i) {
    auto f = box.Pop(2, 0, deadline);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->header().segment(), static_cast<int>(i));
  }
  EXPECT_EQ(log.ok.load(), 1);
}

TEST(JobMailbox, ByteBoundParksBeforeTheFrameBound) {
  JobMailbox box;
  ResumeLog log;
  const size_t n = kMailboxBytes / sizeof(float) / 2;  // two frames fill it
  auto a = box.Push(Frame("j", 0, 0, n), log.Make());
  auto b = box.Push(Frame("j", 0, 1, n), log.Make());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, Delivery::kTaken);
  EXPECT_EQ(*b, Delivery::kParked);
}

TEST(JobMailbox, FailResumesParkedStreamsWithTheError) {
  JobMailbox box;
  ResumeLog log;
  for (size_t i = 0; i < kMailboxFrames; ++i) {
    ASSERT_TRUE(box.Push(Frame("j", 1, i, 1), log.Make()).ok());
  }
  box.Fail(absl::CancelledError("job cancelled"));
  EXPECT_EQ(log.errors.load(), 1);
  auto f = box.Pop(1, 0, absl::Now() + absl::Seconds(1));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(box.Push(Frame("j", 1, 0, 1), log.Make()).status().code(),
            absl::StatusCode::kCancelled);
}

TEST(BlockPool, BlocksComeBackAndAreReused) {
  std::shared_ptr<BlockPool> pool = BlockPool::Create(size_t{16} << 20);
  for (int round = 0; round < 10; ++round) {
    std::vector<grpc::ByteBuffer> frames;
    for (int i = 0; i < 4; ++i) {
      frames.push_back(pool->Encode(TensorHeader(), 1000 + i, [&](float* b) {
        for (int k = 0; k < 1000 + i; ++k) b[k] = static_cast<float>(k + round);
      }));
    }
    auto f = DecodedFrame::Parse(frames[2]);
    ASSERT_TRUE(f.ok());
    std::vector<float> got(f->count());
    f->CopyTo(got.data());
    EXPECT_EQ(got[7], static_cast<float>(7 + round));
  }  // frames released here each round
  EXPECT_EQ(pool->allocations(), 4);
  EXPECT_GT(pool->cached_bytes(), 0u);
}

TEST(BlockPool, CacheIsBounded) {
  std::shared_ptr<BlockPool> pool = BlockPool::Create(64 << 10);
  {
    std::vector<grpc::ByteBuffer> frames;
    for (int i = 0; i < 8; ++i) {
      frames.push_back(
          pool->Encode(TensorHeader(), 16 << 10, [](float* b) { b[0] = 1; }));
    }
  }
  EXPECT_LE(pool->cached_bytes(), size_t{64} << 10);
}

// Over real streams: a receiver that does not consume for a while (its
// mailbox parks the stream at the bound, see the JobMailbox tests) gets every
// frame intact and in order once it does; Send itself never blocks.
TEST(GrpcTransport, ASenderThatOutrunsTheReceiverLosesNothing) {
  auto group = TransportGroup::Create(TransportKind::kGrpc, 2);
  ASSERT_TRUE(group.ok()) << group.status();
  Transport* tx = (*group)->transport(0);
  Transport* rx = (*group)->transport(1);
  constexpr int kFrames = 3 * static_cast<int>(kMailboxFrames);
  constexpr size_t kN = 256 << 10;  // 1 MiB frames
  std::vector<float> data(kN);
  for (int i = 0; i < kFrames; ++i) {
    ChunkTag t;
    t.segment = i;
    std::fill(data.begin(), data.end(), static_cast<float>(i));
    ASSERT_TRUE(tx->Send(1, t, data.data(), kN).ok());
  }
  absl::SleepFor(absl::Milliseconds(300));  // let the streams fill up
  std::vector<float> got(kN);
  for (int i = 0; i < kFrames; ++i) {
    ChunkTag t;
    t.segment = i;
    auto c = rx->Recv(0, t, kN, absl::Now() + absl::Seconds(20));
    ASSERT_TRUE(c.ok()) << c.status();
    (*c)->CopyTo(got.data());
    ASSERT_EQ(got[kN - 1], static_cast<float>(i));
  }
}

TEST(GrpcTransport, SendSumAndForwardCarryTheRightData) {
  auto group = TransportGroup::Create(TransportKind::kGrpc, 3);
  ASSERT_TRUE(group.ok()) << group.status();
  Transport* a = (*group)->transport(0);
  Transport* b = (*group)->transport(1);
  Transport* c = (*group)->transport(2);
  const size_t n = 1001;
  std::vector<float> x(n), y(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = 0.5f * i;
    y[i] = 3.0f - i;
  }
  ChunkTag t0, t1, t2;
  t1.index = 1;
  t2.index = 2;
  ASSERT_TRUE(a->Send(1, t0, x.data(), n).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  auto at_b = b->Recv(0, t0, n, deadline);
  ASSERT_TRUE(at_b.ok()) << at_b.status();
  std::vector<float> stored = y;
  ASSERT_TRUE(b->SendSum(2, t1, stored.data(), **at_b, stored.data()).ok());
  ASSERT_TRUE(b->Forward(2, t2, **at_b).ok());
  auto sum = c->Recv(1, t1, n, deadline);
  auto fwd = c->Recv(1, t2, n, deadline);
  ASSERT_TRUE(sum.ok() && fwd.ok());
  std::vector<float> s(n), f(n);
  (*sum)->CopyTo(s.data());
  (*fwd)->CopyTo(f.data());
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(s[i], y[i] + x[i]);
    ASSERT_EQ(stored[i], y[i] + x[i]);
    ASSERT_EQ(f[i], x[i]);
  }
}

// Runs one ring allreduce of n floats on every rank of `group` (rank r
// holds (i % 13) * (r + 1)) and expects exact sums, identical on all ranks.
void ExpectExactRing(TransportGroup* group, size_t n, const RingOptions& opts,
                     const std::string& what) {
  const int world = group->size();
  std::vector<std::vector<float>> data(world, std::vector<float>(n));
  std::vector<absl::Status> st(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < n; ++i) data[r][i] = static_cast<float>((i % 13) * (r + 1));
    threads.emplace_back([&, r] {
      RingAllreduce ring(group->transport(r), n, opts);
      st[r] = ring.Run(data[r].data(), 0, 0);
    });
  }
  for (auto& t : threads) t.join();
  const float scale = world * (world + 1) / 2.0f;
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(st[r].ok()) << what << ": " << st[r];
    for (size_t i = 0; i < n; i += 97) {
      ASSERT_EQ(data[r][i], static_cast<float>(i % 13) * scale) << what << " at " << i;
    }
    ASSERT_EQ(data[r], data[0]) << what;
  }
}

// Several connections per peer: segments are striped over them (FIFO holds
// per connection only) and the ring still gets exact, identical sums.
TEST(GrpcTransport, RingOverSeveralConnectionsPerPeer) {
  for (int connections : {2, 3}) {
    for (int world : {2, 3}) {
      auto group = TransportGroup::Create(TransportKind::kGrpc, world, connections);
      ASSERT_TRUE(group.ok()) << group.status();
      RingOptions opts;
      opts.segment_bytes = 64 << 10;  // many segments: every lane is used
      ExpectExactRing(group->get(), (1 << 18) + 3, opts,
                      absl::StrCat("connections ", connections, " world ", world));
    }
  }
}

// The integer channel argument `name`, or -1 when absent.
int IntArg(const grpc::ChannelArguments& args, const char* name) {
  const grpc_channel_args c = args.c_channel_args();
  for (size_t i = 0; i < c.num_args; ++i) {
    if (std::string(c.args[i].key) == name && c.args[i].type == GRPC_ARG_INTEGER) {
      return c.args[i].value.integer;
    }
  }
  return -1;
}

// Peer channels turn BDP probing off when told to (common/grpc/grpc_util.h);
// other channels never do; by default nobody does.
TEST(PeerBdpProbe, OnlyPeerChannelsTurnItOff) {
  EXPECT_TRUE(PeerBdpProbe());
  EXPECT_EQ(IntArg(PeerChannelArgs(), GRPC_ARG_HTTP2_BDP_PROBE), -1);
  EXPECT_EQ(IntArg(PeerChannelArgs(), GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL), 1);
  SetPeerBdpProbe(false);
  EXPECT_EQ(IntArg(PeerChannelArgs(), GRPC_ARG_HTTP2_BDP_PROBE), 0);
  EXPECT_EQ(IntArg(DefaultChannelArgs(), GRPC_ARG_HTTP2_BDP_PROBE), -1);
  EXPECT_EQ(IntArg(DefaultChannelArgs(true), GRPC_ARG_HTTP2_BDP_PROBE), -1);
  SetPeerBdpProbe(true);
  EXPECT_EQ(IntArg(PeerChannelArgs(), GRPC_ARG_HTTP2_BDP_PROBE), -1);
}

// The ring stays exact with probing off (windows stay at gRPC's initial
// size: every 1 MiB segment waits for window updates) and on.
TEST(PeerBdpProbe, RingIsExactEitherWay) {
  for (bool probe : {false, true}) {
    SetPeerBdpProbe(probe);
    auto group = TransportGroup::Create(TransportKind::kGrpc, 3);
    ASSERT_TRUE(group.ok()) << group.status();
    ExpectExactRing(group->get(), (1 << 20) + 3, RingOptions{},
                    absl::StrCat("probe ", probe));
  }
  SetPeerBdpProbe(true);
}

}  // namespace
}  // namespace gradsync
