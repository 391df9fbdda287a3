// Ring allreduce over the real gRPC transport (in-process servers on
// loopback) against a simple reference.
#include <random>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/kernels.h"
#include "worker/collectives/transport/grpc/grpc_transport.h"
#include "worker/collectives/ring.h"

namespace gradsync {
namespace {

struct Peer {
  PeerMailboxes mailboxes;
  std::unique_ptr<PeerService> service;
  std::unique_ptr<grpc::Server> server;
  std::string address;
};

class GrpcRingTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(GrpcRingTest, MatchesReferenceThreeTimes) {
  const auto [world, n] = GetParam();
  std::vector<std::unique_ptr<Peer>> peers;
  std::vector<std::string> addrs;
  for (int r = 0; r < world; ++r) {
    auto p = std::make_unique<Peer>();
    p->service = std::make_unique<PeerService>(&p->mailboxes);
    auto started = StartServer("127.0.0.1:0", {p->service.get()});
    ASSERT_TRUE(started.ok()) << started.status();
    p->server = std::move(started->server);
    p->address = LocalAddress("127.0.0.1:0", started->port);
    addrs.push_back(p->address);
    peers.push_back(std::move(p));
  }
  const std::string job = absl::StrCat("g", world, "-", n);
  std::vector<std::unique_ptr<GrpcTransport>> transports;
  std::vector<std::unique_ptr<RingAllreduce>> rings;
  RingOptions opts;
  opts.segment_bytes = 64 << 10;
  opts.timeout = absl::Seconds(10);
  for (int r = 0; r < world; ++r) {
    transports.push_back(std::make_unique<GrpcTransport>(
        job, r, addrs, peers[r]->mailboxes.Open(job)));
    rings.push_back(std::make_unique<RingAllreduce>(transports[r].get(), n, opts));
  }
  for (int run = 0; run < 3; ++run) {
    std::vector<std::vector<float>> data(world, std::vector<float>(n));
    std::vector<double> want(n, 0);
    for (int r = 0; r < world; ++r) {
      std::mt19937 rng(r * 131 + run);
      std::uniform_real_distribution<float> u(-1, 1);
      for (size_t i = 0; i < n; ++i) {
        data[r][i] = u(rng);
        want[i] += data[r][i];
      }
    }
    std::vector<absl::Status> st(world);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] { st[r] = rings[r]->Run(data[r].data(), run, 0); });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(st[r].ok()) << "rank " << r << " run " << run << ": " << st[r];
      EXPECT_EQ(Checksum(data[r].data(), n), Checksum(data[0].data(), n));
    }
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(data[0][i], want[i], 1e-4) << i;
  }
  transports.clear();
  for (auto& p : peers) p->server->Shutdown(std::chrono::system_clock::now());
}

INSTANTIATE_TEST_SUITE_P(
    WorldsAndSizes, GrpcRingTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4, 5),
                       ::testing::Values(size_t{1}, size_t{7}, size_t{1000},
                                         size_t{34186}, size_t{(1 << 20) + 3})));

}  // namespace
}  // namespace gradsync
