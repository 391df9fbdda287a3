// Cost of one PS checkpoint (common/checkpoint.h: write to a temporary file,
// CRC-32, fsync, rename, fsync the directory), as a sync PS slice pays it
// before answering a checkpointed step. Arg: parameters (floats); the
// optimizer state is Adam's (m and v), so a file is 3x the parameters.
// 235146 = the default model (mlp:784-256-128-10, 0.94 MB of parameters);
// 5824522 = mlp:784-2048-2048-10 (23.3 MB of parameters). The directory is
// $GRADSYNC_BENCH_DIR or /tmp.
//
// BM_AllreduceCheckpointSave: an allreduce job's checkpoint as rank 0's sender thread
// pays it (worker/sync/allreduce_checkpoint.h): every piece sent over loopback
// gRPC to a PS service in this process, which writes it as a checkpoint
// file (server/ps/allreduce_checkpoints.h).
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "absl/time/clock.h"
#include "common/checkpoint.h"
#include "common/grpc/grpc_util.h"
#include "server/ps/ps_access.h"
#include "server/ps/ps_service.h"
#include "worker/sync/allreduce_checkpoint.h"

namespace gradsync {
namespace {

std::string BenchDir() {
  const char* env = getenv("GRADSYNC_BENCH_DIR");
  std::string tmpl = std::string(env ? env : "/tmp") + "/ckpt-bench-XXXXXX";
  return mkdtemp(tmpl.data());
}

void BM_WriteCheckpoint(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<float> p(n, 0.5f), m(n, 0.01f), v(n, 1e-4f);
  const std::string dir = BenchDir();
  int64_t step = 0;
  for (auto _ : state) {
    CheckpointView view{"j-1/p0", ++step, p, step, m, v};
    if (!WriteCheckpoint(CheckpointFile(dir, "p0", 0), view).ok()) {
      state.SkipWithError("write failed");
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n) * 12);
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_WriteCheckpoint)
    ->Arg(235146)
    ->Arg(5824522)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_ReadCheckpoint(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<float> p(n, 0.5f), m(n, 0.01f), v(n, 1e-4f);
  const std::string dir = BenchDir();
  const std::string path = CheckpointFile(dir, "p0", 1);
  if (!WriteCheckpoint(path, {"j-1/p0", 1, p, 1, m, v}).ok()) {
    state.SkipWithError("write failed");
  }
  for (auto _ : state) benchmark::DoNotOptimize(ReadCheckpoint(path).ok());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n) * 12);
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_ReadCheckpoint)
    ->Arg(235146)
    ->Arg(5824522)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_AllreduceCheckpointSave(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::string dir = BenchDir();
  PsStore store(dir);
  const auto key = std::make_shared<const JobKey>(*JobKey::Generate());
  const PsAccess access(key);
  PsService service(&store, &access);
  absl::StatusOr<StartedServer> started = StartServer("127.0.0.1:0", {&service});
  if (!started.ok()) {
    state.SkipWithError("cannot start the PS service");
    return;
  }
  const std::string secret = key->SecretOf("j-1", 1);
  AllreduceCheckpointClient client(LocalAddress("127.0.0.1:0", started->port),
                                   PsCredentials{secret, 1, secret, 1});
  AllreduceState s;
  s.params.assign(n, 0.5f);
  s.optimizer = {1, std::vector<float>(n, 0.01f), std::vector<float>(n, 1e-4f)};
  int64_t step = 0;
  for (auto _ : state) {
    if (!client.Save("j-1", ++step, s, absl::Now() + absl::Seconds(60)).ok()) {
      state.SkipWithError("save failed");
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n) * 12);
  started->server->Shutdown(ToChrono(absl::Now() + absl::Seconds(1)));
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_AllreduceCheckpointSave)
    ->Arg(235146)
    ->Arg(5824522)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace gradsync

BENCHMARK_MAIN();
