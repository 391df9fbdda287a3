// Ring allreduce over the gRPC transport on loopback (all ranks in this
// process, one Peer server each), nccl-tests style: time per allreduce,
// algbw = bytes / t, busbw = algbw * 2(N-1)/N, and the ratio of busbw to a
// memcpy bandwidth measured in the same run. Results are verified each run.
//
//   build/bench/allreduce_bench --benchmark_counters_tabular=true
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "absl/strings/str_cat.h"
#include "common/memory.h"
#include "worker/collectives/ring.h"
#include "worker/collectives/testing/transport_group.h"
#include "worker/sync/stall_transport.h"

namespace gradsync {
namespace {

double MemcpyBandwidth(size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes);
  const absl::Time t0 = absl::Now();
  int reps = 0;
  while (absl::Now() - t0 < absl::Milliseconds(200)) {
    std::memcpy(b.data(), a.data(), bytes);
    benchmark::DoNotOptimize(b.data());
    ++reps;
  }
  return static_cast<double>(bytes) * reps / absl::ToDoubleSeconds(absl::Now() - t0);
}

// `stall_watched`: every rank's transport wrapped in a StallTransport, as
// the worker daemon runs it (what the stall report costs the ring).
void RingAllreduceGrpc(benchmark::State& state, bool stall_watched) {
  const int world = static_cast<int>(state.range(0));
  const size_t bytes = static_cast<size_t>(state.range(1));
  const size_t n = bytes / sizeof(float);
  absl::StatusOr<std::unique_ptr<TransportGroup>> group =
      TransportGroup::Create(TransportKind::kGrpc, world);
  if (!group.ok()) {
    state.SkipWithError(group.status().ToString().c_str());
    return;
  }
  RingOptions opts;
  opts.segment_bytes = 1 << 20;
  std::vector<std::unique_ptr<RingAllreduce>> rings;
  std::vector<std::vector<float>> data(world, std::vector<float>(n, 0.0f));
  StallWatch watch(absl::Seconds(15), [](const StallReport&) {});
  std::vector<std::unique_ptr<StallTransport>> watched;
  for (int r = 0; r < world; ++r) {
    Transport* t = (*group)->transport(r);
    if (stall_watched) {
      watched.push_back(
          std::make_unique<StallTransport>(t, &watch, std::vector<std::string>()));
      t = watched.back().get();
    }
    rings.push_back(std::make_unique<RingAllreduce>(t, n, opts));
  }
  int64_t step = 0;
  double seconds = 0;
  for (auto _ : state) {
    for (int r = 0; r < world; ++r) {
      std::fill(data[r].begin(), data[r].end(), static_cast<float>(r + 1));
    }
    std::vector<absl::Status> st(world);
    std::vector<std::thread> threads;
    const absl::Time t0 = absl::Now();
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] { st[r] = rings[r]->Run(data[r].data(), step, 0); });
    }
    for (auto& t : threads) t.join();
    const double s = absl::ToDoubleSeconds(absl::Now() - t0);
    seconds += s;
    state.SetIterationTime(s);
    ++step;
    const float want = world * (world + 1) / 2.0f;
    for (int r = 0; r < world; ++r) {
      if (!st[r].ok() || data[r][n / 2] != want) {
        state.SkipWithError(absl::StrCat("rank ", r, ": ", st[r].ToString()).c_str());
        break;
      }
    }
  }
  const double t = seconds / std::max<int64_t>(1, state.iterations());
  const double algbw = bytes / t;
  const double busbw = algbw * 2.0 * (world - 1) / world;
  state.counters["algbw_GBps"] = algbw / 1e9;
  state.counters["busbw_GBps"] = busbw / 1e9;
  state.counters["busbw_vs_memcpy"] = busbw / MemcpyBandwidth(bytes);
}

void BM_RingAllreduceGrpc(benchmark::State& state) { RingAllreduceGrpc(state, false); }
void BM_RingAllreduceGrpcStallWatched(benchmark::State& state) {
  RingAllreduceGrpc(state, true);
}

BENCHMARK(BM_RingAllreduceGrpc)
    ->ArgsProduct({{2, 4}, {1 << 20, 8 << 20, 64 << 20}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);
BENCHMARK(BM_RingAllreduceGrpcStallWatched)
    ->ArgsProduct({{2, 4}, {1 << 20, 8 << 20, 64 << 20}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

}  // namespace
}  // namespace gradsync

int main(int argc, char** argv) {
  gradsync::TuneAllocatorForLargeBuffers();  // as the daemons do
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
