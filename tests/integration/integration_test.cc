// Integration: real gradsync-server / gradsync-worker processes on loopback.
// Every test's cluster is shut down (SIGTERM, then SIGKILL) when it ends, and
// the daemons die with the test process (PR_SET_PDEATHSIG).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/spec/job_spec.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/local_cluster.h"
#include "common/grpc/grpc_util.h"
#include "gradsync/v1/gradsync.grpc.pb.h"
#include "tests/integration/cluster_fixture.h"

namespace gradsync {
namespace {

TEST(Integration, LocalCompareFourPairsOneEpochReach80PercentAccuracy) {
  const std::string dir = TempDir();
  const std::string json = dir + "/results.json";
  const int rc = Shell(absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync local --compare",
                                    " --workers 4 --epochs 1 --results=", json,
                                    " --log_dir=", dir, " > ", dir, "/out.txt 2>&1"),
                       420);
  const std::string out = Slurp(dir + "/out.txt");
  std::cout << out;
  ASSERT_EQ(rc, 0) << out;
  nlohmann::json r = nlohmann::json::parse(Slurp(json));
  ASSERT_EQ(r["jobs"].size(), 4u);
  std::set<std::string> pairs;
  for (const auto& j : r["jobs"]) {
    const std::string label =
        j["strategy"].get<std::string>() + "-" + j["mode"].get<std::string>();
    pairs.insert(label);
    EXPECT_EQ(j["state"], "SUCCEEDED") << label << ": " << j["error"];
    EXPECT_GE(j["test_accuracy"].get<double>(), 0.80) << label;
    EXPECT_EQ(j["param_checksums"].size(), 4u) << label;
    EXPECT_EQ(j["per_epoch"].size(), 1u) << label;
    EXPECT_GT(j["samples_per_second"].get<double>(), 0) << label;
    EXPECT_FALSE(j["init_checksum"].get<std::string>().empty()) << label;
    if (j["strategy"] == "ring") {
      for (const auto& c : j["param_checksums"]) {
        EXPECT_EQ(c, j["param_checksums"][0]) << label << " replicas differ";
      }
    }
    RecordProperty(label + "_test_accuracy",
                   std::to_string(j["test_accuracy"].get<double>()));
  }
  EXPECT_EQ(pairs, (std::set<std::string>{"ps-sync", "ps-async", "ring-sync",
                                          "ring-async"}));
}

// --compare runs a one-step warm-up job first (so that the first compared
// job does not also pay for loading the dataset), and leaves it out of the
// table and the results; --compare_warmup=false runs none. (--autotune's
// bench jobs would take job numbers too.)
TEST(Integration, LocalCompareRunsAnUnreportedWarmUpJobFirst) {
  for (const bool warm : {true, false}) {
    const std::string dir = TempDir();
    const std::string json = dir + "/results.json";
    const int rc = Shell(
        absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync local --compare --pairs=ring-sync",
                     " --workers 2 --steps 2 --autotune=false --compare_warmup=",
                     warm ? "true" : "false",
                     " --results=", json, " --log_dir=", dir, " > ", dir,
                     "/out.txt 2>&1"),
        120);
    const std::string out = Slurp(dir + "/out.txt");
    ASSERT_EQ(rc, 0) << out;
    EXPECT_EQ(out.find("warm-up:") != std::string::npos, warm) << out;
    nlohmann::json r = nlohmann::json::parse(Slurp(json));
    ASSERT_EQ(r["jobs"].size(), 1u) << out;
    const std::string id = r["jobs"][0]["job_id"].get<std::string>();
    // The coordinator numbers jobs from 1: the warm-up took the first.
    EXPECT_EQ(id.substr(id.rfind('-')), warm ? "-2" : "-1") << out;
    EXPECT_EQ(r["jobs"][0]["state"], "SUCCEEDED") << out;
    EXPECT_EQ(r["jobs"][0]["steps"], 2) << out;
  }
}

TEST(Integration, LocalClusterReusesALogDirectoryWithoutStaleAddresses) {
  // The last run's daemons announced ports that nobody listens on now; the
  // launcher must read the new announcements, not these.
  const std::string dir = TempDir();
  for (const char* name : {"server", "ps1", "worker0", "worker1"}) {
    std::ofstream(absl::StrCat(dir, "/", name, ".out"))
        << "listening on 127.0.0.1:1\n";
  }
  LocalClusterOptions o;
  o.workers = 2;
  o.ps_shards = 2;
  o.bin_dir = GRADSYNC_BIN_DIR;
  o.log_dir = dir;
  o.start_timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<LocalCluster>> c = LocalCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE((*c)->coordinator(), "127.0.0.1:1");
  for (const LocalCluster::Process& w : (*c)->workers()) {
    EXPECT_NE(w.address, "127.0.0.1:1") << w.name;
  }
  (*c)->Shutdown();
}

// 16-bit wire formats through the real daemons: each strategy trains to
// within 2 points of the same float32 job, ring replicas stay bit-identical,
// and the parameters differ from the float32 run's (the format was used).
TEST(Integration, SixteenBitWireTrainsLikeFloat32OnBothStrategies) {
  Cluster c(3, 2);
  ASSERT_TRUE(c.ok());
  for (const std::string strategy : {"ring", "ps"}) {
    std::map<v1::WireDtype, v1::Job> done;
    for (v1::WireDtype wire :
         {v1::WIRE_DTYPE_FP32, v1::WIRE_DTYPE_BF16, v1::WIRE_DTYPE_FP16}) {
      SCOPED_TRACE(strategy + " " + WireDtypeName(wire));
      v1::JobSpec spec = Spec(strategy, "sync", 3);
      spec.set_ps_shards(2);
      spec.set_steps(400);
      spec.set_wire_dtype(wire);
      v1::Job job;
      ASSERT_TRUE(c.Submit(spec, &job).ok());
      done[wire] = c.WaitFor(job.id(), absl::Seconds(120), Terminal);
      ASSERT_EQ(done[wire].state(), v1::SUCCEEDED) << done[wire].error();
      const v1::JobResult& r = done[wire].result();
      ASSERT_EQ(r.param_checksums_size(), 3);
      if (strategy == "ring") {
        EXPECT_EQ(r.param_checksums(1), r.param_checksums(0));
        EXPECT_EQ(r.param_checksums(2), r.param_checksums(0));
      }
    }
    const double fp32 = done[v1::WIRE_DTYPE_FP32].result().test_accuracy();
    EXPECT_GT(fp32, 0.70) << strategy;
    for (v1::WireDtype wire : {v1::WIRE_DTYPE_BF16, v1::WIRE_DTYPE_FP16}) {
      const v1::JobResult& r = done[wire].result();
      EXPECT_NEAR(r.test_accuracy(), fp32, 0.02)
          << strategy << " " << WireDtypeName(wire);
      EXPECT_NE(r.param_checksums(0),
                done[v1::WIRE_DTYPE_FP32].result().param_checksums(0))
          << strategy << " " << WireDtypeName(wire);
      std::cout << strategy << " " << WireDtypeName(wire) << ": accuracy "
                << r.test_accuracy() << " (fp32 " << fp32 << ")\n";
    }
  }
}

void KillWorkerMidJob(const std::string& strategy) {
  Cluster c(4);
  ASSERT_TRUE(c.ok());
  v1::JobSpec spec = Spec(strategy, "sync", 4);
  spec.set_epochs(50);  // far longer than the test
  v1::Job job;
  ASSERT_TRUE(c.Submit(spec, &job).ok());
  v1::Job running = c.WaitFor(job.id(), absl::Seconds(30), [](const v1::Job& j) {
    return j.state() == v1::RUNNING && j.step() >= 20;
  });
  ASSERT_EQ(running.state(), v1::RUNNING) << running.error();
  c->KillWorker(2);
  const absl::Time killed = absl::Now();
  v1::Job failed = c.WaitFor(job.id(), absl::Seconds(10), Terminal);
  const absl::Duration took = absl::Now() - killed;
  EXPECT_EQ(failed.state(), v1::FAILED);
  EXPECT_NE(failed.error().find("w2"), std::string::npos) << failed.error();
  EXPECT_LE(took, absl::Seconds(10));
  std::cout << strategy << ": job failed " << absl::FormatDuration(took)
            << " after kill -9: " << failed.error() << "\n";
  // The server still answers and the other workers return to idle.
  const absl::Time deadline = absl::Now() + absl::Seconds(15);
  while (c.IdleWorkers() != 3 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_EQ(c.IdleWorkers(), 3);
  v1::JobSpec small = Spec(strategy, "sync", 3);
  small.set_steps(20);
  ASSERT_TRUE(c.Submit(small, &job).ok());
  v1::Job done = c.WaitFor(job.id(), absl::Seconds(60), Terminal);
  EXPECT_EQ(done.state(), v1::SUCCEEDED) << done.error();
}

TEST(Integration, KillNineRingWorkerFailsJobNamingItAndServerKeepsServing) {
  KillWorkerMidJob("ring");
}

TEST(Integration, KillNinePsWorkerFailsJobNamingItAndServerKeepsServing) {
  KillWorkerMidJob("ps");
}

TEST(Integration, StalledWorkerIsDetectedByHeartbeatAndJobFails) {
  Cluster c(3);
  ASSERT_TRUE(c.ok());
  v1::JobSpec spec = Spec("ring", "sync", 3);
  spec.set_epochs(50);
  v1::Job job;
  ASSERT_TRUE(c.Submit(spec, &job).ok());
  v1::Job running = c.WaitFor(job.id(), absl::Seconds(30), [](const v1::Job& j) {
    return j.state() == v1::RUNNING && j.step() >= 10;
  });
  ASSERT_EQ(running.state(), v1::RUNNING);
  c->StopWorker(1);  // hangs, but its sockets stay open
  const absl::Time stopped = absl::Now();
  v1::Job failed = c.WaitFor(job.id(), absl::Seconds(15), Terminal);
  EXPECT_EQ(failed.state(), v1::FAILED);
  EXPECT_NE(failed.error().find("w1"), std::string::npos) << failed.error();
  std::cout << "stalled worker: job failed " << absl::FormatDuration(absl::Now() - stopped)
            << " after SIGSTOP: " << failed.error() << "\n";
  EXPECT_LE(absl::Now() - stopped, absl::Seconds(10));
}

TEST(Integration, BadInputGetsClearErrors) {
  Cluster c(1);
  ASSERT_TRUE(c.ok());
  struct Case {
    std::function<void(v1::JobSpec*)> mutate;
    std::string field;
  };
  std::vector<Case> cases = {
      {[](v1::JobSpec* s) { s->set_workers(0); }, "workers"},
      {[](v1::JobSpec* s) { s->set_strategy(static_cast<v1::Strategy>(42)); }, "strategy"},
      {[](v1::JobSpec* s) { s->set_mode(static_cast<v1::SyncMode>(42)); }, "mode"},
      {[](v1::JobSpec* s) { s->set_model("cnn:3x3"); }, "model"},
      {[](v1::JobSpec* s) { s->set_model("mlp:100-64-10"); }, "model"},
      {[](v1::JobSpec* s) { s->set_batch_size(0); }, "batch_size"},
      {[](v1::JobSpec* s) { s->set_staleness(-2); }, "staleness"},
  };
  for (const Case& k : cases) {
    v1::JobSpec s = Spec("ring", "sync", 1);
    k.mutate(&s);
    v1::Job job;
    grpc::Status st = c.Submit(s, &job);
    EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT) << k.field;
    EXPECT_EQ(st.error_message().rfind(k.field + ":", 0), 0u) << st.error_message();
  }
  v1::Job job;
  EXPECT_EQ(c.Get("j-999", &job).error_code(), grpc::NOT_FOUND);
  EXPECT_EQ(c.Cancel("j-999", &job).error_code(), grpc::NOT_FOUND);

  // A data directory the worker does not allow (here: one that does not
  // exist) fails the job with a clear error, not a hang.
  v1::JobSpec s = Spec("ring", "sync", 1);
  s.set_data_dir("/nonexistent/fashion");
  ASSERT_TRUE(c.Submit(s, &job).ok());
  v1::Job failed = c.WaitFor(job.id(), absl::Seconds(10), Terminal);
  EXPECT_EQ(failed.state(), v1::FAILED);
  EXPECT_EQ(failed.error_code(),
            static_cast<int>(absl::StatusCode::kPermissionDenied))
      << failed.error();
  EXPECT_NE(failed.error().find("/nonexistent/fashion"), std::string::npos)
      << failed.error();
}

TEST(Integration, CudaJobOnAWorkerWithoutGpuFailsBeforeTraining) {
  Cluster c(2);
  ASSERT_TRUE(c.ok());
  v1::ListJobsResponse resp;
  ASSERT_TRUE(c.List(&resp).ok());
  for (const auto& w : resp.workers()) {
    if (w.num_gpus() > 0) GTEST_SKIP() << "workers have GPUs here";
  }
  v1::JobSpec s = Spec("ring", "sync", 2);
  s.set_device(v1::DEVICE_CUDA);
  v1::Job job;
  ASSERT_TRUE(c.Submit(s, &job).ok());
  v1::Job failed = c.WaitFor(job.id(), absl::Seconds(10), Terminal);
  EXPECT_EQ(failed.state(), v1::FAILED);
  EXPECT_EQ(failed.error_code(),
            static_cast<int>(absl::StatusCode::kFailedPrecondition))
      << failed.error();
  EXPECT_EQ(failed.error().rfind("job wants device=cuda but worker w0", 0), 0u)
      << failed.error();
  EXPECT_EQ(failed.step(), 0);
  EXPECT_EQ(c.IdleWorkers(), 2);
}

TEST(Integration, CancelRunningJobReturnsWorkersToIdle) {
  Cluster c(2);
  ASSERT_TRUE(c.ok());
  v1::JobSpec spec = Spec("ps", "async", 2);
  spec.set_epochs(50);
  v1::Job job;
  ASSERT_TRUE(c.Submit(spec, &job).ok());
  c.WaitFor(job.id(), absl::Seconds(30), [](const v1::Job& j) {
    return j.state() == v1::RUNNING && j.step() > 5;
  });
  v1::Job cancelled;
  ASSERT_TRUE(c.Cancel(job.id(), &cancelled).ok());
  EXPECT_EQ(cancelled.state(), v1::CANCELLED);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (c.IdleWorkers() != 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(c.IdleWorkers(), 2);
}

TEST(Integration, AJobTooLargeForTheClusterDoesNotBlockASmallOne) {
  Cluster c(2);
  ASSERT_TRUE(c.ok());
  v1::Job huge, small;
  ASSERT_TRUE(c.Submit(Spec("ring", "sync", 50), &huge).ok());
  v1::JobSpec s = Spec("ring", "sync", 2);
  s.set_steps(5);
  s.set_train_limit(2048);
  ASSERT_TRUE(c.Submit(s, &small).ok());
  v1::Job done = c.WaitFor(small.id(), absl::Seconds(30), Terminal);
  EXPECT_EQ(done.state(), v1::SUCCEEDED) << done.error();
  v1::Job still;
  ASSERT_TRUE(c.Get(huge.id(), &still).ok());
  EXPECT_EQ(still.state(), v1::QUEUED);  // waits for 48 more workers
  ASSERT_TRUE(c.Cancel(huge.id(), &still).ok());
}

TEST(Integration, JoinStreamThatNeverRegistersIsClosed) {
  Cluster c(1);
  ASSERT_TRUE(c.ok());
  auto stub = v1::Coordinator::NewStub(c.Channel(c->coordinator()));
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(30)));  // backstop
  auto stream = stub->Join(&ctx);
  const absl::Time start = absl::Now();
  v1::CoordinatorMessage m;
  EXPECT_FALSE(stream->Read(&m));  // the coordinator ends the silent stream
  grpc::Status st = stream->Finish();
  EXPECT_NE(st.error_code(), grpc::DEADLINE_EXCEEDED) << st.error_message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  // The coordinator still serves.
  v1::ListJobsResponse resp;
  EXPECT_TRUE(c.List(&resp).ok());
}

TEST(Integration, CliSubmitWaitListStatusAgainstARunningServer) {
  Cluster c(2, /*shards=*/2);
  ASSERT_TRUE(c.ok());
  const std::string dir = TempDir();
  const std::string bin = GRADSYNC_BIN_DIR;
  const std::string server = c.CliFlags();
  // A two-shard PS job, submitted and watched to the end.
  int rc = Shell(absl::StrCat(bin, "/gradsync submit ", server,
                              " --strategy=ps --ps-shards=2 --workers=2 --steps=30",
                              " --wait --results=", dir, "/r.json > ", dir,
                              "/submit.txt 2>&1"),
                 120);
  ASSERT_EQ(rc, 0) << Slurp(dir + "/submit.txt");
  nlohmann::json r = nlohmann::json::parse(Slurp(dir + "/r.json"));
  EXPECT_EQ(r["state"], "SUCCEEDED");
  EXPECT_EQ(r["ps_shards"], 2);
  EXPECT_EQ(r["steps"], 30);
  const std::string id = r["job_id"];
  // list --json shows the job and both workers idle again.
  rc = Shell(absl::StrCat(bin, "/gradsync list --json ", server, " > ", dir,
                          "/list.json"),
             30);
  ASSERT_EQ(rc, 0);
  nlohmann::json l = nlohmann::json::parse(Slurp(dir + "/list.json"));
  ASSERT_EQ(l["jobs"].size(), 1u);
  EXPECT_EQ(l["jobs"][0]["job_id"], id);
  ASSERT_EQ(l["workers"].size(), 2u);
  for (const auto& w : l["workers"]) EXPECT_EQ(w["state"], "idle");
  // status of a known and an unknown job.
  EXPECT_EQ(Shell(absl::StrCat(bin, "/gradsync status ", id, " ", server,
                               " > /dev/null"), 30), 0);
  EXPECT_EQ(Shell(absl::StrCat(bin, "/gradsync status j-nope ", server, " 2> ",
                               dir, "/err.txt"), 30), 1);
  EXPECT_NE(Slurp(dir + "/err.txt").find("NOT_FOUND"), std::string::npos);
  // A bad spec is refused by the server with the field named, exit code 2.
  EXPECT_EQ(Shell(absl::StrCat(bin, "/gradsync submit --batch-size=0 ", server,
                               " 2> ", dir, "/bad.txt"), 30), 2);
  EXPECT_NE(Slurp(dir + "/bad.txt").find("batch_size"), std::string::npos);
}

TEST(Integration, CliPointedAtAClosedPortSaysSoInOneLine) {
  const std::string dir = TempDir();
  const int rc = Shell(absl::StrCat(GRADSYNC_BIN_DIR,
                                    "/gradsync status j-1 --server=127.0.0.1:1 > ",
                                    dir, "/out 2> ", dir, "/err"),
                       30);
  EXPECT_EQ(rc, 1);
  const std::string err = Slurp(dir + "/err");
  EXPECT_NE(err.find("cannot reach the coordinator at 127.0.0.1:1"),
            std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST(Integration, CliRejectsUnknownCommandAndBadPairs) {
  EXPECT_EQ(Shell(absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync frobnicate 2>/dev/null"), 30), 2);
  EXPECT_EQ(Shell(absl::StrCat(GRADSYNC_BIN_DIR,
                               "/gradsync local --compare --pairs=ps-lazy 2>/dev/null"),
                  30),
            2);
}

// Checks one `gradsync bench` results file: every row OK and sane.
void ExpectBenchJsonSane(const nlohmann::json& j, const std::string& op,
                         int workers, const std::vector<int64_t>& sizes,
                         int iters) {
  EXPECT_EQ(j["state"], "SUCCEEDED") << j.dump(2);
  EXPECT_EQ(j["op"], op);
  EXPECT_EQ(j["workers"], workers);
  EXPECT_GT(j["alpha_seconds"].get<double>(), 0);
  EXPECT_GT(j["beta_bytes_per_second"].get<double>(), 0);
  ASSERT_EQ(j["rows"].size(), sizes.size()) << j.dump(2);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const nlohmann::json& r = j["rows"][i];
    EXPECT_EQ(r["bytes"], sizes[i]);
    EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
    EXPECT_FALSE(r["algorithm"].get<std::string>().empty());
    EXPECT_NE(r["algorithm"], "auto");
    EXPECT_GT(r["time_seconds"].get<double>(), 0);
    EXPECT_GT(r["algbw"].get<double>(), 0);
    EXPECT_GT(r["busbw"].get<double>(), 0);
    EXPECT_GT(r["model_seconds"].get<double>(), 0);
    EXPECT_GT(r["ratio"].get<double>(), 0);
    ASSERT_EQ(r["iteration_seconds"].size(), static_cast<size_t>(iters));
    ASSERT_EQ(r["rank_iteration_seconds"].size(), static_cast<size_t>(workers));
    for (int t = 0; t < iters; ++t) {
      double slowest = 0;
      for (int rank = 0; rank < workers; ++rank) {
        slowest = std::max(slowest, r["rank_iteration_seconds"][rank][t].get<double>());
      }
      EXPECT_DOUBLE_EQ(r["iteration_seconds"][t].get<double>(), slowest);
    }
  }
}

TEST(Integration, BenchAllreduceAndBroadcastOnThreeWorkersVerifyEveryRow) {
  Cluster c(3);
  ASSERT_TRUE(c.ok());
  const std::string dir = TempDir();
  const std::string server = c.CliFlags();
  // 1 MiB + 4 bytes: not a power of two, not a multiple of the segment.
  const std::vector<int64_t> sizes = {4096, 1048580};
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"allreduce", "ring"}, {"allreduce", "auto"}, {"broadcast", "ring"}};
  for (const auto& [op, algorithm] : runs) {
    SCOPED_TRACE(op + " " + algorithm);
    const std::string out = absl::StrCat(dir, "/", op, "-", algorithm);
    const int rc = Shell(
        absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync bench ", server,
                     " --workers=3 --op=", op, " --algorithm=", algorithm,
                     " --sizes=4K,1048580 --iters=3 --warmup=1 --results=", out,
                     ".json > ", out, ".txt 2>&1"),
        60);
    ASSERT_EQ(rc, 0) << Slurp(out + ".txt");
    const std::string table = Slurp(out + ".txt");
    EXPECT_NE(table.find("busbw"), std::string::npos) << table;
    EXPECT_EQ(table.find("FAILED"), std::string::npos) << table;
    ExpectBenchJsonSane(nlohmann::json::parse(Slurp(out + ".json")), op, 3,
                        sizes, 3);
  }
  EXPECT_EQ(c.IdleWorkers(), 3);
}

// With host groups, the bench measures the link between hosts and the one
// inside a host (ranks 0 and 1's is one of them) and models the ring and
// hier over the groups, whichever kind ranks 0 and 1's link is.
TEST(Integration, BenchMeasuresTheLinksBetweenAndInsideHostGroups) {
  Cluster c(4);
  ASSERT_TRUE(c.ok());
  const std::string dir = TempDir();
  const auto bench = [&](const std::string& algorithm,
                         const std::string& groups) {
    const std::string out = absl::StrCat(dir, "/", algorithm, "-", groups);
    const int rc = Shell(
        absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync bench ", c.CliFlags(),
                     " --workers=4 --algorithm=", algorithm,
                     " --groups=", groups,
                     " --sizes=4K,1M --iters=3 --warmup=1 --results=", out,
                     ".json > ", out, ".txt 2>&1"),
        60);
    EXPECT_EQ(rc, 0) << Slurp(out + ".txt");
    return std::make_pair(Slurp(out + ".txt"),
                          nlohmann::json::parse(Slurp(out + ".json"), nullptr,
                                                /*allow_exceptions=*/false));
  };
  const struct {
    std::string groups;
    std::vector<int> between, inside;
  } cases[] = {{"0,0,1,1", {0, 2}, {0, 1}}, {"0,1,0,1", {0, 1}, {0, 2}}};
  for (const auto& k : cases) {
    for (const std::string algorithm : {"ring", "hier"}) {
      SCOPED_TRACE(algorithm + " " + k.groups);
      const auto [table, j] = bench(algorithm, k.groups);
      ASSERT_TRUE(j.is_object()) << table;
      EXPECT_EQ(j["between_hosts"]["ranks"], nlohmann::json(k.between)) << table;
      EXPECT_EQ(j["inside_host"]["ranks"], nlohmann::json(k.inside)) << table;
      EXPECT_GT(j["between_hosts"]["beta_bytes_per_second"].get<double>(), 0);
      EXPECT_GT(j["inside_host"]["beta_bytes_per_second"].get<double>(), 0);
      EXPECT_NE(table.find(absl::StrCat("host groups ", k.groups)),
                std::string::npos)
          << table;
      for (const auto& r : j["rows"]) {
        EXPECT_EQ(r["algorithm"], algorithm);
        EXPECT_TRUE(r["ok"].get<bool>());
        EXPECT_GT(r["model_seconds"].get<double>(), 0);
      }
    }
  }
  // One host: ranks 0 and 1's link alone.
  const auto [table, j] = bench("ring", "0,0,0,0");
  ASSERT_TRUE(j.is_object()) << table;
  EXPECT_TRUE(j["between_hosts"].is_null()) << table;
  EXPECT_EQ(j["inside_host"]["ranks"], nlohmann::json({0, 1}));
  EXPECT_EQ(table.find("between hosts"), std::string::npos) << table;
  EXPECT_EQ(c.IdleWorkers(), 4);
}

// A push/pull larger than one gRPC message (64 MiB through one shard; the
// limit, common/message_limits.h, is 48 MiB) is cut into the PS partitions
// that training uses, so it succeeds and verifies.
TEST(Integration, BenchPushPullLargerThanOneMessageThroughOneShard) {
  const std::string dir = TempDir();
  const std::string out = dir + "/out.txt";
  const int rc = Shell(
      absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync local bench --workers=2",
                   " --op=pushpull --ps_shards=1 --sizes=64M --iters=1",
                   " --warmup=0 --results=", dir, "/r.json --log_dir=", dir,
                   " > ", out, " 2>&1"),
      120);
  ASSERT_EQ(rc, 0) << Slurp(out);
  ExpectBenchJsonSane(nlohmann::json::parse(Slurp(dir + "/r.json")), "pushpull",
                      2, {int64_t{64} << 20}, 1);
}

// --ps_partition_bytes reaches the job (its JSON) and the bench still
// verifies; a size out of range is refused with the field named, exit 2.
TEST(Integration, BenchPushPullTakesThePartitionSize) {
  const std::string dir = TempDir();
  const std::string out = dir + "/out.txt";
  const int rc = Shell(
      absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync local bench --workers=2",
                   " --op=pushpull --ps_shards=2 --sizes=1048588 --iters=2",
                   " --warmup=1 --ps_partition_bytes=65536 --results=", dir,
                   "/r.json --log_dir=", dir, " > ", out, " 2>&1"),
      120);
  ASSERT_EQ(rc, 0) << Slurp(out);
  const nlohmann::json j = nlohmann::json::parse(Slurp(dir + "/r.json"));
  ExpectBenchJsonSane(j, "pushpull", 2, {(int64_t{1} << 20) + 12}, 2);
  EXPECT_EQ(j["ps_partition_bytes"], 65536) << j.dump();
  const int bad = Shell(
      absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync local bench --workers=2",
                   " --op=pushpull --ps_shards=1 --sizes=4K --iters=1",
                   " --ps_partition_bytes=1000 --log_dir=", dir, "/bad > ", out,
                   " 2>&1"),
      60);
  EXPECT_EQ(bad, 2) << Slurp(out);
  EXPECT_NE(Slurp(out).find("ps_partition_bytes: must be between"),
            std::string::npos)
      << Slurp(out);
}

// `local bench --peer_bdp_probe=false` starts its workers so and the ring
// bench verifies; a value that is not a bool is refused before anything
// starts.
TEST(Integration, LocalBenchPassesPeerBdpProbeToItsWorkers) {
  const std::string dir = TempDir();
  const std::string out = dir + "/out.txt";
  const int rc = Shell(
      absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync local bench --workers=3",
                   " --algorithm=ring --sizes=1048588 --iters=2 --warmup=1",
                   " --peer_bdp_probe=false --log_dir=", dir, " > ", out, " 2>&1"),
      120);
  ASSERT_EQ(rc, 0) << Slurp(out);
  EXPECT_NE(Slurp(out).find("OK"), std::string::npos) << Slurp(out);
  const int bad = Shell(
      absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync local bench --workers=2",
                   " --sizes=4K --iters=1 --peer_bdp_probe=maybe --log_dir=", dir,
                   "/bad > ", out, " 2>&1"),
      60);
  EXPECT_NE(bad, 0) << Slurp(out);
  EXPECT_NE(Slurp(out).find("peer_bdp_probe"), std::string::npos) << Slurp(out);
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad/worker0.log")) << Slurp(out);
}

TEST(Integration, BenchRefusesSizesThatAreNotWholeFloats) {
  const std::string dir = TempDir();
  EXPECT_EQ(Shell(absl::StrCat(GRADSYNC_BIN_DIR,
                               "/gradsync bench --server=127.0.0.1:1 --sizes=4K,6 2> ",
                               dir, "/err"),
                  30),
            2);
  EXPECT_NE(Slurp(dir + "/err").find("sizes: 6 bytes is not a positive multiple of 4"),
            std::string::npos)
      << Slurp(dir + "/err");
}

TEST(Integration, BenchFailsWithinTheStepTimeoutWhenARankDies) {
  Cluster c(3);
  ASSERT_TRUE(c.ok());
  v1::JobSpec spec;
  spec.set_kind(v1::JOB_KIND_BENCH);
  spec.set_workers(3);
  spec.set_step_timeout_ms(3000);
  spec.mutable_bench()->set_op(v1::BENCH_OP_ALLREDUCE);
  spec.mutable_bench()->add_sizes(4 << 20);
  spec.mutable_bench()->set_iters(10000);
  v1::Job job;
  ASSERT_TRUE(c.Submit(spec, &job).ok());
  job = c.WaitFor(job.id(), absl::Seconds(20),
                  [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  ASSERT_EQ(job.state(), v1::RUNNING) << job.DebugString();
  absl::SleepFor(absl::Seconds(1));
  ASSERT_TRUE(c.Get(job.id(), &job).ok());
  ASSERT_EQ(job.state(), v1::RUNNING) << "the bench ended before the kill";
  c->KillWorker(1);
  const absl::Time killed = absl::Now();
  job = c.WaitFor(job.id(), absl::Seconds(20), Terminal);
  EXPECT_EQ(job.state(), v1::FAILED) << job.DebugString();
  EXPECT_NE(job.error().find("rank"), std::string::npos) << job.error();
  EXPECT_LT(absl::Now() - killed, absl::Seconds(12));
}

}  // namespace
}  // namespace gradsync
