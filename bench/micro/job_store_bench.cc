// Cost of one job-history transaction (SqliteJobStore::Save: the job row
// upserted and one event appended, WAL, synchronous=NORMAL), which the
// coordinator pays under its mutex on every state transition and epoch.
// The job carries `epochs` per-epoch results and 4 ranks' checksums, like a
// finished training job. BM_LoadAll: what reading the history back costs at
// start-up.
#include <stdlib.h>

#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "absl/strings/str_cat.h"
#include "server/coordinator/sqlite_job_store.h"

namespace gradsync {
namespace {

v1::Job TypicalJob(int epochs) {
  v1::Job job;
  job.set_state(v1::RUNNING);
  job.mutable_spec()->set_workers(4);
  job.mutable_spec()->set_model("mlp:784-512-256-10");
  for (int r = 0; r < 4; ++r) {
    job.add_workers(absl::StrCat("w", r));
    job.mutable_result()->add_param_checksums("0123456789abcdef");
  }
  for (int e = 1; e <= epochs; ++e) {
    v1::EpochResult* er = job.mutable_result()->add_epochs();
    er->set_epoch(e);
    er->set_train_loss(0.5);
    er->set_test_accuracy(0.85);
  }
  return job;
}

void BM_SaveTransition(benchmark::State& state) {
  char tmpl[] = "/tmp/gradsync-store-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  auto store = SqliteJobStore::Open(dir);
  if (!store.ok()) {
    state.SkipWithError(std::string(store.status().message()).c_str());
    return;
  }
  v1::Job job = TypicalJob(static_cast<int>(state.range(0)));
  v1::JobEvent ev;
  ev.set_kind(v1::JobEvent::STATE);
  int64_t n = 0;
  for (auto _ : state) {
    // A new job every 8 saves: rows and event lists stay job-sized.
    job.set_id(absl::StrCat("j-bench-", n++ / 8));
    *ev.mutable_job() = job;
    absl::Status st = (*store)->Save(job, {ev});
    if (!st.ok()) state.SkipWithError(std::string(st.message()).c_str());
  }
  state.counters["bytes_per_save"] =
      static_cast<double>(job.ByteSizeLong() + ev.ByteSizeLong());
  store->reset();
  std::string cleanup = absl::StrCat("rm -rf '", dir, "'");
  if (system(cleanup.c_str()) != 0) state.SkipWithError("cleanup failed");
}
BENCHMARK(BM_SaveTransition)->Arg(1)->Arg(50)->Unit(benchmark::kMicrosecond);

// Start-up cost: LoadAll of `range(0)` finished jobs with 4 events each
// (queued, running, one epoch, ended), 10 epochs of results.
void BM_LoadAll(benchmark::State& state) {
  char tmpl[] = "/tmp/gradsync-store-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  auto store = SqliteJobStore::Open(dir);
  if (!store.ok()) {
    state.SkipWithError(std::string(store.status().message()).c_str());
    return;
  }
  v1::Job job = TypicalJob(10);
  std::vector<v1::JobEvent> events(4);
  for (int64_t i = 0; i < state.range(0); ++i) {
    job.set_id(absl::StrCat("j-bench-", i));
    for (v1::JobEvent& ev : events) *ev.mutable_job() = job;
    if (!(*store)->Save(job, events).ok()) state.SkipWithError("save failed");
  }
  for (auto _ : state) {
    absl::StatusOr<std::vector<StoredJob>> jobs = (*store)->LoadAll();
    if (!jobs.ok() || static_cast<int64_t>(jobs->size()) != state.range(0)) {
      state.SkipWithError("load failed");
    }
  }
  store->reset();
  std::string cleanup = absl::StrCat("rm -rf '", dir, "'");
  if (system(cleanup.c_str()) != 0) state.SkipWithError("cleanup failed");
}
BENCHMARK(BM_LoadAll)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gradsync

BENCHMARK_MAIN();
