#include "tests/collectives/collective_test_util.h"

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "absl/time/clock.h"

#include <gtest/gtest.h>

namespace gradsync {

void PrintTo(TransportKind kind, std::ostream* os) { *os << TransportKindName(kind); }

std::unique_ptr<TransportGroup> NewGroup(TransportKind kind, int world,
                                         int connections_per_peer, WireDtype dtype) {
  absl::StatusOr<std::unique_ptr<TransportGroup>> group =
      TransportGroup::Create(kind, world, connections_per_peer, dtype);
  if (!group.ok()) {
    ADD_FAILURE() << "cannot build a " << TransportKindName(kind) << " group of " << world
                  << ": " << group.status();
    return nullptr;
  }
  return std::move(*group);
}

std::vector<absl::Status> OnRanks(const std::vector<int>& ranks,
                                  const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> st(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] { st[i] = fn(ranks[i]); });
  }
  for (auto& t : threads) t.join();
  return st;
}

std::vector<int> AllRanks(int world) {
  std::vector<int> ranks(world);
  for (int r = 0; r < world; ++r) ranks[r] = r;
  return ranks;
}

std::vector<float> IntegerData(int rank, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>(static_cast<int>((i * 7 + rank * 131) % 41) - 20);
  }
  return v;
}

std::vector<float> InexactData(int rank, size_t n) {
  std::mt19937 rng(977 * rank + static_cast<int>(n % 8191));
  std::uniform_real_distribution<float> u(-1, 1);
  std::uniform_int_distribution<int> e(-12, 12);
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(u(rng), e(rng));
  return v;
}

void RunAndCheck(std::vector<std::unique_ptr<Allreduce>>& algos, size_t n, int64_t step,
                 int bucket, double tolerance,
                 const std::function<std::vector<float>(int, size_t)>& make) {
  const int world = static_cast<int>(algos.size());
  std::vector<std::vector<float>> data(world);
  std::vector<double> want(n, 0.0), magnitude(n, 0.0);
  for (int r = 0; r < world; ++r) {
    data[r] = make(r, n);
    for (size_t i = 0; i < n; ++i) {
      want[i] += data[r][i];
      magnitude[i] += std::fabs(data[r][i]);
    }
  }
  auto st = OnRanks(AllRanks(world),
                    [&](int r) { return algos[r]->Run(data[r].data(), step, bucket); });
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(st[r].ok()) << "rank " << r << " step " << step << ": " << st[r];
  }
  for (int r = 0; r < world; ++r) {
    size_t wrong = 0, first = n;
    for (size_t i = 0; i < n; ++i) {
      if (std::fabs(data[r][i] - want[i]) > tolerance * magnitude[i]) {
        if (wrong++ == 0) first = i;
      }
    }
    ASSERT_EQ(wrong, 0u) << "rank " << r << " step " << step << ": first at " << first
                         << " got " << data[r][first] << " want " << want[first];
    EXPECT_EQ(std::memcmp(data[r].data(), data[0].data(), n * sizeof(float)), 0)
        << "rank " << r << " differs from rank 0 at step " << step;
  }
}

void ExpectAbortUnblocksRun(Allreduce* algo, Transport* transport, size_t n) {
  std::vector<float> data(n, 1.0f);
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(100));
    transport->Abort(absl::CancelledError("test abort"));
  });
  const absl::Time start = absl::Now();
  absl::Status st = algo->Run(data.data(), 0, 0);
  aborter.join();
  EXPECT_TRUE(absl::IsCancelled(st)) << st;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

}  // namespace gradsync
