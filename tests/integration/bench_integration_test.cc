// Integration tests of `gradsync bench` and `gradsync local bench` against
// real daemons on loopback: every row verified, the links the bench
// measures by host group, push/pull through the shards, and failures.
#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gradsync/v1/gradsync.pb.h"
#include "tests/integration/cluster_fixture.h"

namespace gradsync {
namespace {

// Checks one `gradsync bench` results file: every row OK and sane.
void ExpectBenchJsonSane(const nlohmann::json& j, const std::string& op, int workers,
                         const std::vector<int64_t>& sizes, int iters) {
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
    const int rc =
        Shell(absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync bench ", server,
                           " --workers=3 --op=", op, " --algorithm=", algorithm,
                           " --sizes=4K,1048580 --iters=3 --warmup=1 --results=", out,
                           ".json > ", out, ".txt 2>&1"),
              60);
    ASSERT_EQ(rc, 0) << Slurp(out + ".txt");
    const std::string table = Slurp(out + ".txt");
    EXPECT_NE(table.find("busbw"), std::string::npos) << table;
    EXPECT_EQ(table.find("FAILED"), std::string::npos) << table;
    ExpectBenchJsonSane(nlohmann::json::parse(Slurp(out + ".json")), op, 3, sizes, 3);
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
  const auto bench = [&](const std::string& algorithm, const std::string& groups) {
    const std::string out = absl::StrCat(dir, "/", algorithm, "-", groups);
    const int rc =
        Shell(absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync bench ", c.CliFlags(),
                           " --workers=4 --algorithm=", algorithm, " --groups=", groups,
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
      EXPECT_NE(table.find(absl::StrCat("host groups ", k.groups)), std::string::npos)
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
  const int rc = Shell(absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync local bench --workers=2",
                                    " --op=pushpull --ps_shards=1 --sizes=64M --iters=1",
                                    " --warmup=0 --results=", dir,
                                    "/r.json --log_dir=", dir, " > ", out, " 2>&1"),
                       120);
  ASSERT_EQ(rc, 0) << Slurp(out);
  ExpectBenchJsonSane(nlohmann::json::parse(Slurp(dir + "/r.json")), "pushpull", 2,
                      {int64_t{64} << 20}, 1);
}

// --ps_partition_bytes reaches the job (its JSON) and the bench still
// verifies; a size out of range is refused with the field named, exit 2.
TEST(Integration, BenchPushPullTakesThePartitionSize) {
  const std::string dir = TempDir();
  const std::string out = dir + "/out.txt";
  const int rc =
      Shell(absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync local bench --workers=2",
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
                   " --ps_partition_bytes=1000 --log_dir=", dir, "/bad > ", out, " 2>&1"),
      60);
  EXPECT_EQ(bad, 2) << Slurp(out);
  EXPECT_NE(Slurp(out).find("ps_partition_bytes: must be between"), std::string::npos)
      << Slurp(out);
}

// `local bench --peer_bdp_probe=false` starts its workers so and the ring
// bench verifies; a value that is not a bool is refused before anything
// starts.
TEST(Integration, LocalBenchPassesPeerBdpProbeToItsWorkers) {
  const std::string dir = TempDir();
  const std::string out = dir + "/out.txt";
  const int rc =
      Shell(absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync local bench --workers=3",
                         " --algorithm=ring --sizes=1048588 --iters=2 --warmup=1",
                         " --peer_bdp_probe=false --log_dir=", dir, " > ", out, " 2>&1"),
            120);
  ASSERT_EQ(rc, 0) << Slurp(out);
  EXPECT_NE(Slurp(out).find("OK"), std::string::npos) << Slurp(out);
  const int bad =
      Shell(absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync local bench --workers=2",
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
