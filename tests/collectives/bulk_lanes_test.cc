// Bulk lanes (GrpcTransportOptions.bulk_bytes, common/grpc/grpc_util.h "Bulk
// connections"): collectives of at least bulk_bytes travel on the bulk Peer
// servers and smaller ones on the peer servers, in any order and mix, with
// exact results; a bulk address that does not answer falls back to the peer
// address.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc/grpc_util.h"
#include "tests/collectives/collective_test_util.h"
#include "worker/collectives/ring.h"
#include "worker/collectives/transport/grpc/grpc_transport.h"

namespace gradsync {
namespace {

constexpr size_t kBulkBytes = 64 << 10;

// One allreduce of n floats with `algorithm` on every rank of `group`,
// checked exactly (RunAndCheck).
void RunOnAll(TransportGroup* group, AllreduceAlgorithm algorithm, size_t n,
              int64_t step) {
  std::vector<std::unique_ptr<Allreduce>> algos;
  for (int r = 0; r < group->size(); ++r) {
    auto a = MakeAllreduce(algorithm, group->transport(r), n, AllreduceOptions{});
    ASSERT_TRUE(a.ok()) << a.status();
    algos.push_back(*std::move(a));
  }
  SCOPED_TRACE(absl::StrCat("algorithm ", algorithm, " n ", n, " step ", step));
  RunAndCheck(algos, n, step, 0, 0.0, IntegerData);
}

int64_t Accepted(const TransportGroup& g, bool bulk) {
  int64_t total = 0;
  for (int r = 0; r < g.size(); ++r) total += g.streams_accepted(r, bulk);
  return total;
}

TEST(BulkLanes, OnlyCollectivesOfBulkBytesOrMoreUseTheBulkServers) {
  auto group =
      TransportGroup::Create(TransportKind::kGrpc, 3, 1, WireDtype::kFp32, kBulkBytes);
  ASSERT_TRUE(group.ok()) << group.status();
  TransportGroup* g = group->get();
  const size_t below = kBulkBytes / sizeof(float) - 1;
  const size_t at = kBulkBytes / sizeof(float);

  RunOnAll(g, AllreduceAlgorithm::kRing, below, 0);
  EXPECT_EQ(Accepted(*g, /*bulk=*/true), 0);
  const int64_t small_streams = Accepted(*g, /*bulk=*/false);
  EXPECT_GT(small_streams, 0);

  RunOnAll(g, AllreduceAlgorithm::kRing, at, 1);
  for (int r = 0; r < g->size(); ++r) {
    EXPECT_GT(g->streams_accepted(r, /*bulk=*/true), 0) << "rank " << r;
  }
  EXPECT_EQ(Accepted(*g, /*bulk=*/false), small_streams)
      << "a bulk collective opened a stream to a peer server";

  // Sizes and algorithms mixed, as a job's buckets and a bench's sizes are:
  // every frame must reach the lane its receiver waits on.
  int64_t step = 2;
  for (int round = 0; round < 3; ++round) {
    for (AllreduceAlgorithm alg :
         {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kHalvingDoubling,
          AllreduceAlgorithm::kRecursiveDoubling}) {
      for (size_t n : {size_t{1}, at + 7, size_t{1000}, 3 * at}) {
        RunOnAll(g, alg, n, step++);
      }
    }
  }
  // A broadcast picks its lane by its size too.
  for (size_t n : {size_t{5}, 2 * at + 1}) {
    std::vector<std::vector<float>> data(g->size());
    for (int r = 0; r < g->size(); ++r) data[r] = IntegerData(r, n);
    std::vector<absl::Status> st = OnRanks(AllRanks(g->size()), [&](int r) {
      return RingBroadcast(g->transport(r), data[r].data(), n, /*root=*/1, 1 << 20,
                           absl::Now() + absl::Seconds(30));
    });
    for (int r = 0; r < g->size(); ++r) {
      ASSERT_TRUE(st[r].ok()) << st[r];
      EXPECT_EQ(data[r], IntegerData(1, n)) << "rank " << r << " n " << n;
    }
  }
}

TEST(BulkLanes, NeverWhenBulkBytesIsZero) {
  auto group = TransportGroup::Create(TransportKind::kGrpc, 2, 1, WireDtype::kFp32, 0);
  ASSERT_TRUE(group.ok()) << group.status();
  RunOnAll(group->get(), AllreduceAlgorithm::kRing, (1 << 20) + 3, 0);
  EXPECT_EQ(Accepted(**group, /*bulk=*/true), 0);
}

// A port on this host that nothing listens on (a server's, once stopped).
int ClosedPort() {
  PeerMailboxes boxes;
  PeerService service(&boxes);
  absl::StatusOr<StartedServer> s = StartPeerServer("127.0.0.1:0", {&service});
  if (!s.ok()) return 0;
  s->server->Shutdown(ToChrono(absl::Now()));
  s->server->Wait();
  return s->port;
}

TEST(BulkLanes, ABulkAddressThatDoesNotAnswerFallsBackToThePeerAddress) {
  const int world = 2;
  const int dead = ClosedPort();
  ASSERT_GT(dead, 0);
  struct Rank {
    PeerMailboxes boxes;
    std::unique_ptr<PeerService> service;
    std::unique_ptr<grpc::Server> server;
  };
  std::vector<std::unique_ptr<Rank>> ranks;
  std::vector<std::string> addresses;
  for (int r = 0; r < world; ++r) {
    auto rk = std::make_unique<Rank>();
    rk->service = std::make_unique<PeerService>(&rk->boxes);
    absl::StatusOr<StartedServer> s = StartPeerServer("127.0.0.1:0", {rk->service.get()});
    ASSERT_TRUE(s.ok()) << s.status();
    rk->server = std::move(s->server);
    addresses.push_back(LocalAddress("127.0.0.1:0", s->port));
    ranks.push_back(std::move(rk));
  }
  GrpcTransportOptions options;
  options.job_secret = "s";
  options.bulk_bytes = kBulkBytes;
  options.bulk_peer_addresses.assign(world, absl::StrCat("127.0.0.1:", dead));
  std::vector<std::unique_ptr<GrpcTransport>> transports;
  for (int r = 0; r < world; ++r) {
    transports.push_back(std::make_unique<GrpcTransport>(
        "j", r, addresses, ranks[r]->boxes.Open("j", "s", world), options));
  }
  const size_t n = 3 * kBulkBytes / sizeof(float) + 1;
  std::vector<std::unique_ptr<Allreduce>> algos;
  for (int r = 0; r < world; ++r) {
    auto a = MakeAllreduce(AllreduceAlgorithm::kRing, transports[r].get(), n,
                           AllreduceOptions{});
    ASSERT_TRUE(a.ok()) << a.status();
    algos.push_back(*std::move(a));
  }
  const absl::Time start = absl::Now();
  RunAndCheck(algos, n, 0, 0, 0.0, IntegerData);
  // One fallback wait per sender, in parallel; well inside a step timeout.
  EXPECT_LT(absl::Now() - start, kBulkConnectTimeout + absl::Seconds(5));
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(ranks[r]->service->streams_accepted(), 1) << "rank " << r;
  }
  transports.clear();
  for (auto& rk : ranks) rk->server->Shutdown(ToChrono(absl::Now() + absl::Seconds(1)));
}

// A job's ranks use the bulk servers of ranks on their own host only: across
// hosts the bulk lanes' fixed window is slower than a probing one.
TEST(BulkLanes, SameHostBulkAddressesKeepsOnlyThisHostsRanks) {
  const std::vector<std::string> peers = {
      "10.0.0.1:5000", "10.0.0.2:5000", "10.0.0.1:5001", "[::1]:5000", "10.0.0.10:5000"};
  const std::vector<std::string> bulk = {"10.0.0.1:6000", "10.0.0.2:6000",
                                         "10.0.0.1:6001", "[::1]:6000", "10.0.0.10:6000"};
  EXPECT_EQ(SameHostBulkAddresses(peers, bulk, 0),
            (std::vector<std::string>{"10.0.0.1:6000", "", "10.0.0.1:6001", "", ""}));
  EXPECT_EQ(SameHostBulkAddresses(peers, bulk, 1),
            (std::vector<std::string>{"", "10.0.0.2:6000", "", "", ""}));
  EXPECT_EQ(SameHostBulkAddresses(peers, bulk, 3),
            (std::vector<std::string>{"", "", "", "[::1]:6000", ""}));
  // Everything on one host (the local launcher, 127.0.0.1): all kept.
  const std::vector<std::string> local = {"127.0.0.1:5000", "127.0.0.1:5001"};
  EXPECT_EQ(SameHostBulkAddresses(local, {"127.0.0.1:6000", ""}, 1),
            (std::vector<std::string>{"127.0.0.1:6000", ""}));
  // A short or missing list, or a rank outside the world: no bulk address.
  EXPECT_EQ(SameHostBulkAddresses(local, {}, 0), std::vector<std::string>{});
  EXPECT_EQ(SameHostBulkAddresses(local, {"127.0.0.1:6000"}, 0),
            std::vector<std::string>{"127.0.0.1:6000"});
  EXPECT_EQ(SameHostBulkAddresses(local, {"a:1", "a:2"}, 2),
            (std::vector<std::string>{"", ""}));
}

}  // namespace
}  // namespace gradsync
