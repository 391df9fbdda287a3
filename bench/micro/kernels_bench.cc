// Reduction kernels against the plain loop a[i] += b[i] over aligned arrays
// (the "a+=b" baseline) and memcpy, in one run. Bytes processed count every
// array read or written once, so GB/s is memory traffic:
//   a+=b            read a, read b, write a      (3 n floats)
//   AddIntoUnaligned as a+=b, b unaligned        (3 n)
//   SumTo1          out = a + b                  (3 n)
//   SumTo2          out = a = a + b (ring's last reduce-scatter step)  (4 n)
//   FrameSumTo      SumTo1 straight out of a received gRPC frame (3 n)
//   SgdMomentum     v = mu v + g; p -= lr v       (read p, g, v; write p, v: 5 n)
//   Adam            m, v, p updated from g        (read p, g, m, v; write p, m, v: 7 n)
// The optimizer steps also run at the default model's size (235 146
// parameters, mlp:784-256-128-10), the step every ring worker takes.
//
//   build/bench/kernels_bench --benchmark_counters_tabular=true
#include <cstring>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "common/grpc/tensor_frame.h"
#include "common/kernels.h"
#include "common/optimizer.h"

namespace gradsync {
namespace {

constexpr int64_t kFloats[] = {256 << 10, 4 << 20};  // 1 MiB (a segment), 16 MiB

void BM_Memcpy(benchmark::State& state) {
  const size_t n = state.range(0);
  std::vector<float> a(n, 1), b(n, 2);
  for (auto _ : state) {
    std::memcpy(a.data(), b.data(), n * sizeof(float));
    benchmark::DoNotOptimize(a.data());
  }
  state.SetBytesProcessed(state.iterations() * 2 * n * sizeof(float));
}

void BM_APlusEqualsB(benchmark::State& state) {
  const size_t n = state.range(0);
  std::vector<float> a(n, 1), b(n, 2);
  for (auto _ : state) {
    float* pa = a.data();
    const float* pb = b.data();
    for (size_t i = 0; i < n; ++i) pa[i] += pb[i];
    benchmark::DoNotOptimize(pa);
  }
  state.SetBytesProcessed(state.iterations() * 3 * n * sizeof(float));
}

void BM_AddIntoUnaligned(benchmark::State& state) {
  const size_t n = state.range(0);
  std::vector<float> a(n, 1);
  std::vector<char> b(n * sizeof(float) + 8, 0);
  for (auto _ : state) {
    AddIntoUnaligned(a.data(), b.data() + 3, n);
    benchmark::DoNotOptimize(a.data());
  }
  state.SetBytesProcessed(state.iterations() * 3 * n * sizeof(float));
}

void BM_SumTo1(benchmark::State& state) {
  const size_t n = state.range(0);
  std::vector<float> a(n, 1), out(n);
  std::vector<char> b(n * sizeof(float) + 8, 0);
  for (auto _ : state) {
    SumIntoUnaligned(out.data(), nullptr, a.data(), b.data() + 3, n);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * 3 * n * sizeof(float));
}

void BM_SumTo2(benchmark::State& state) {
  const size_t n = state.range(0);
  std::vector<float> a(n, 1), out(n);
  std::vector<char> b(n * sizeof(float) + 8, 0);
  for (auto _ : state) {
    SumIntoUnaligned(out.data(), a.data(), a.data(), b.data() + 3, n);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * 4 * n * sizeof(float));
}

void BM_FrameSumTo(benchmark::State& state) {
  const size_t n = state.range(0);
  std::vector<float> data(n, 3), a(n, 1), out(n);
  TensorHeader h;
  h.set_job_id("bench");
  grpc::ByteBuffer buf = EncodeFrame(h, data.data(), n, nullptr);
  absl::StatusOr<DecodedFrame> f = DecodedFrame::Parse(buf);
  if (!f.ok()) {
    state.SkipWithError("parse failed");
    return;
  }
  for (auto _ : state) {
    f->SumTo(a.data(), out.data(), nullptr);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * 3 * n * sizeof(float));
}

void RunOptimizer(benchmark::State& state, OptimizerKind kind, int arrays) {
  const size_t n = state.range(0);
  OptimizerOptions o;
  o.kind = kind;
  o.lr = 1e-6f;  // keeps the parameters finite over millions of steps
  absl::StatusOr<Optimizer> opt = Optimizer::Create(o, n);
  if (!opt.ok()) {
    state.SkipWithError(std::string(opt.status().message()).c_str());
    return;
  }
  std::vector<float> p(n, 1), g(n, 0.5f);
  for (auto _ : state) {
    opt->Apply(p.data(), g.data());
    benchmark::DoNotOptimize(p.data());
  }
  state.SetBytesProcessed(state.iterations() * arrays * n * sizeof(float));
}

void BM_SgdMomentum(benchmark::State& state) {
  RunOptimizer(state, OptimizerKind::kSgd, 5);
}
void BM_Adam(benchmark::State& state) { RunOptimizer(state, OptimizerKind::kAdam, 7); }

constexpr int64_t kDefaultModelParams = 235146;

BENCHMARK(BM_Memcpy)->Arg(kFloats[0])->Arg(kFloats[1])->UseRealTime();
BENCHMARK(BM_APlusEqualsB)->Arg(kFloats[0])->Arg(kFloats[1])->UseRealTime();
BENCHMARK(BM_AddIntoUnaligned)->Arg(kFloats[0])->Arg(kFloats[1])->UseRealTime();
BENCHMARK(BM_SumTo1)->Arg(kFloats[0])->Arg(kFloats[1])->UseRealTime();
BENCHMARK(BM_SumTo2)->Arg(kFloats[0])->Arg(kFloats[1])->UseRealTime();
BENCHMARK(BM_FrameSumTo)->Arg(kFloats[0])->Arg(kFloats[1])->UseRealTime();
BENCHMARK(BM_APlusEqualsB)->Arg(kDefaultModelParams)->UseRealTime();
BENCHMARK(BM_SgdMomentum)->Arg(kDefaultModelParams)->Arg(kFloats[1])->UseRealTime();
BENCHMARK(BM_Adam)->Arg(kDefaultModelParams)->Arg(kFloats[1])->UseRealTime();

}  // namespace
}  // namespace gradsync

BENCHMARK_MAIN();
