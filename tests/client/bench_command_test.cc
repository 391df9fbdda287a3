// The bench command's pure parts: --sizes parsing, rows from a finished job
// (time, algbw, busbw, model), and the tuning table it writes, read back
// with the workers' parser (common/spec/tuning_table.h).
#include "client/bench_command.h"
#include "common/cost_model.h"

#include <gtest/gtest.h>

#include "common/spec/tuning_table.h"

namespace gradsync {
namespace {

std::vector<int64_t> Sizes(const std::string& text) {
  absl::StatusOr<std::vector<int64_t>> s = ParseBenchSizes(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status();
  return s.ok() ? *s : std::vector<int64_t>{};
}

TEST(BenchSizes, RangesArePowersOfTwoFromLowToHigh) {
  EXPECT_EQ(Sizes("4K:64K"), (std::vector<int64_t>{4096, 8192, 16384, 32768, 65536}));
  EXPECT_EQ(Sizes("4K:256M").size(), 17u);
  EXPECT_EQ(Sizes("4K:256M").back(), int64_t{256} << 20);
  // HI need not be on the sequence: it stops at the last one below.
  EXPECT_EQ(Sizes("12:100"), (std::vector<int64_t>{12, 24, 48, 96}));
  EXPECT_EQ(Sizes("1M:1M"), (std::vector<int64_t>{1 << 20}));
}

TEST(BenchSizes, ListsSuffixesAndPlainBytes) {
  EXPECT_EQ(Sizes("4K,1M,64M"), (std::vector<int64_t>{4096, 1 << 20, 64 << 20}));
  EXPECT_EQ(Sizes("1048580"), (std::vector<int64_t>{1048580}));
  EXPECT_EQ(Sizes(" 4kib , 2MiB,1g "), (std::vector<int64_t>{4096, 2 << 20, 1 << 30}));
  EXPECT_EQ(Sizes("4K:16K,100"), (std::vector<int64_t>{4096, 8192, 16384, 100}));
}

TEST(BenchSizes, BadInputIsRefusedNamingSizes) {
  for (const char* bad :
       {"", "4K,", "abc", "4X", "-4", "4K:", ":4K", "1M:4K", "0:4K", "6", "4K,10", "2G",
        "4K:1M:4M", "1.5M", "4:1G,4:1G,4:1G", "99999999999999999"}) {
    absl::StatusOr<std::vector<int64_t>> s = ParseBenchSizes(bad);
    EXPECT_FALSE(s.ok()) << "'" << bad << "' was accepted";
    if (!s.ok()) {
      EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(s.status().message().substr(0, 7), "sizes: ") << s.status();
    }
  }
}

v1::Job FinishedBench(v1::BenchOp op, int workers) {
  v1::Job job;
  job.set_id("j-1");
  job.set_state(v1::SUCCEEDED);
  v1::JobSpec* spec = job.mutable_spec();
  spec->set_kind(v1::JOB_KIND_BENCH);
  spec->set_workers(workers);
  spec->set_ps_shards(1);
  spec->set_chunk_bytes(1 << 20);
  spec->mutable_bench()->set_op(op);
  spec->mutable_bench()->set_iters(2);
  v1::BenchResult* b = job.mutable_result()->mutable_bench();
  b->set_alpha_seconds(1e-5);
  b->set_beta_bytes_per_second(1e9);
  b->set_iters(2);
  v1::BenchRow* row = b->add_rows();
  row->set_bytes(1 << 20);
  row->set_algorithm("ring");
  row->set_time_seconds(0.002);
  row->set_ok(true);
  for (double t : {0.002, 0.003}) row->add_iteration_seconds(t);
  for (int r = 0; r < workers; ++r) {
    for (double t : {0.001, 0.002}) row->add_rank_iteration_seconds(t);
  }
  return job;
}

TEST(BenchRows, BandwidthsModelAndRatio) {
  const v1::Job job = FinishedBench(v1::BENCH_OP_ALLREDUCE, 4);
  const std::vector<BenchRowReport> rows = BenchRows(job);
  ASSERT_EQ(rows.size(), 1u);
  const BenchRowReport& r = rows[0];
  EXPECT_DOUBLE_EQ(r.algbw, (1 << 20) / 0.002);
  EXPECT_DOUBLE_EQ(r.busbw, r.algbw * 2 * 3 / 4);
  const double model = 2 * 3 * 1e-5 + 2.0 * 3 / 4 * (1 << 20) / 1e9;
  EXPECT_DOUBLE_EQ(r.model_seconds, model);
  EXPECT_DOUBLE_EQ(r.ratio, model / 0.002);
  EXPECT_TRUE(r.ok);
  const nlohmann::json j = BenchToJson(job, rows);
  EXPECT_EQ(j["op"], "allreduce");
  EXPECT_EQ(j["rows"][0]["rank_iteration_seconds"].size(), 4u);
  EXPECT_EQ(j["rows"][0]["rank_iteration_seconds"][3].size(), 2u);
  EXPECT_NE(FormatBenchTable(job, rows).find("OK"), std::string::npos);
}

void SetLink(v1::BenchLink* l, int a, int b, double alpha, double beta) {
  l->set_rank_a(a);
  l->set_rank_b(b);
  l->set_alpha_seconds(alpha);
  l->set_beta_bytes_per_second(beta);
}

// Ranks 0 and 1 share a host: the link between hosts (ranks 0 and 2) is the
// model's α and β, the one inside a host (ranks 0 and 1) the local link,
// and the groups shape the ring and hier models.
TEST(BenchRows, TwoLinksModelRingAndHierOverSharedHosts) {
  v1::Job job = FinishedBench(v1::BENCH_OP_ALLREDUCE, 4);
  v1::BenchResult* b = job.mutable_result()->mutable_bench();
  b->set_alpha_seconds(2e-6);  // ranks 0 and 1: inside a host
  b->set_beta_bytes_per_second(4e9);
  SetLink(b->mutable_inside_host(), 0, 1, 2e-6, 4e9);
  SetLink(b->mutable_between_hosts(), 0, 2, 1e-4, 1e8);
  for (int g : {0, 0, 1, 1}) b->add_host_groups(g);
  *b->add_rows() = b->rows(0);
  b->mutable_rows(1)->set_algorithm("hier");

  const CostInputs in = LinkInputs(*b, 4);
  EXPECT_DOUBLE_EQ(in.alpha, 1e-4);
  EXPECT_DOUBLE_EQ(in.beta, 1e8);
  EXPECT_DOUBLE_EQ(in.local_alpha, 2e-6);
  EXPECT_DOUBLE_EQ(in.local_beta, 4e9);
  EXPECT_EQ(in.groups, (std::vector<int>{0, 0, 1, 1}));

  const std::vector<BenchRowReport> rows = BenchRows(job);
  ASSERT_EQ(rows.size(), 2u);
  const double k = 1 << 20;
  // Ring: 2 of 4 hops cross, one per host; the link between hosts bounds.
  EXPECT_DOUBLE_EQ(rows[0].model_seconds, 6 * (2 * 1e-4 + 2 * 2e-6) / 4 + 1.5 * k / 1e8);
  // Hier: one segment each way inside a host, then a ring of 2 leaders.
  EXPECT_DOUBLE_EQ(rows[1].model_seconds, 2 * (2e-6 + k / 4e9) + 2 * 1e-4 + k / 1e8);

  const std::string table = FormatBenchTable(job, rows);
  EXPECT_NE(table.find("between hosts alpha 100.00 us, beta 0.100 GB/s "
                       "(ranks 0-2 ping-pong)"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("inside a host alpha 2.00 us, beta 4.000 GB/s "
                       "(ranks 0-1 ping-pong)"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("host groups 0,0,1,1"), std::string::npos) << table;
  const nlohmann::json j = BenchToJson(job, rows);
  EXPECT_EQ(j["between_hosts"]["ranks"], nlohmann::json({0, 2}));
  EXPECT_DOUBLE_EQ(j["between_hosts"]["alpha_seconds"].get<double>(), 1e-4);
  EXPECT_DOUBLE_EQ(j["inside_host"]["beta_bytes_per_second"].get<double>(), 4e9);
  EXPECT_EQ(j["host_groups"], nlohmann::json({0, 0, 1, 1}));

  // Ranks 0 and 1 on two hosts, ranks 0 and 2 on one: the same links from
  // the other pairs (hier's local steps use ranks 0 and 2's link).
  b->clear_host_groups();
  for (int g : {0, 1, 0, 1}) b->add_host_groups(g);
  b->set_alpha_seconds(1e-4);
  b->set_beta_bytes_per_second(1e8);
  SetLink(b->mutable_between_hosts(), 0, 1, 1e-4, 1e8);
  SetLink(b->mutable_inside_host(), 0, 2, 2e-6, 4e9);
  const std::vector<BenchRowReport> interleaved = BenchRows(job);
  // Every ring hop crosses, two leave each host.
  EXPECT_DOUBLE_EQ(interleaved[0].model_seconds, 6 * 1e-4 + 1.5 * k * 2 / 1e8);
  EXPECT_DOUBLE_EQ(interleaved[1].model_seconds, rows[1].model_seconds);
}

// One host for all: ranks 0 and 1's link alone, and the plain ring.
TEST(BenchRows, OneLinkOnOneHostIsThePlainModel) {
  v1::Job job = FinishedBench(v1::BENCH_OP_ALLREDUCE, 4);
  v1::BenchResult* b = job.mutable_result()->mutable_bench();
  SetLink(b->mutable_inside_host(), 0, 1, 1e-5, 1e9);
  for (int g : {0, 0, 0, 0}) b->add_host_groups(g);
  const std::vector<BenchRowReport> rows = BenchRows(job);
  EXPECT_DOUBLE_EQ(rows[0].model_seconds, 2 * 3 * 1e-5 + 2.0 * 3 / 4 * (1 << 20) / 1e9);
  const std::string table = FormatBenchTable(job, rows);
  EXPECT_EQ(table.find("between hosts"), std::string::npos) << table;
  EXPECT_NE(table.find("(ranks 0-1 ping-pong); time"), std::string::npos) << table;
  const nlohmann::json j = BenchToJson(job, rows);
  EXPECT_TRUE(j["between_hosts"].is_null());
  EXPECT_FALSE(j["inside_host"].is_null());
}

TEST(BenchRows, BusBandwidthConventions) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(v1::BENCH_OP_ALLREDUCE, 1, 1, 4096), 0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(v1::BENCH_OP_ALLREDUCE, 2, 1, 4096), 1);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(v1::BENCH_OP_BROADCAST, 8, 1, 4096), 1);
  // Push/pull: the cost model's link factor (16 partitions of 64 MiB over 2
  // shards: a shard's link carries 8 x K/2 each way).
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(v1::BENCH_OP_PUSHPULL, 8, 2, 64 << 20), 4);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(v1::BENCH_OP_PUSHPULL, 8, 2, 64 << 20),
                   PushPullLinkFactor(8, 2, 64 << 20));
}

BenchRowReport Row(int64_t bytes, const std::string& algorithm, double t,
                   bool ok = true) {
  BenchRowReport r;
  r.bytes = bytes;
  r.algorithm = algorithm;
  r.time_seconds = t;
  r.ok = ok;
  return r;
}

TEST(BenchTune, FastestPerSizeParsesAsATuningTable) {
  const std::vector<std::vector<BenchRowReport>> runs = {
      {Row(4096, "ring", 3e-4), Row(65536, "ring", 4e-4), Row(1 << 20, "ring", 1e-3),
       Row(16 << 20, "ring", 1e-2)},
      {Row(4096, "hd", 2e-4), Row(65536, "hd", 3e-4), Row(1 << 20, "hd", 2e-3),
       Row(16 << 20, "hd", 2e-2, /*ok=*/false)},
      {Row(4096, "rd", 1e-4), Row(65536, "rd", 5e-4), Row(1 << 20, "rd", 5e-3),
       Row(16 << 20, "rd", 1e-3, /*ok=*/false)}};
  const std::string text = TuningLines(4, runs);
  absl::StatusOr<TuningTable> table = TuningTable::Parse(text, "tune");
  ASSERT_TRUE(table.ok()) << table.status() << "\n" << text;
  EXPECT_EQ(table->Choose(4, 4096), AllreduceAlgorithm::kRecursiveDoubling) << text;
  EXPECT_EQ(table->Choose(4, 65536), AllreduceAlgorithm::kHalvingDoubling) << text;
  // A FAILED row never wins: ring for 16 MiB although rd's time is lower.
  EXPECT_EQ(table->Choose(4, 1 << 20), AllreduceAlgorithm::kRing) << text;
  EXPECT_EQ(table->Choose(4, 16 << 20), AllreduceAlgorithm::kRing) << text;
  EXPECT_EQ(table->Choose(4, int64_t{1} << 40), AllreduceAlgorithm::kRing) << text;
  // Consecutive sizes with one winner are one rule: rd, hd, ring(inf).
  EXPECT_EQ(table->rules().size(), 3u) << text;
}

TEST(BenchTune, PassesAreAveragedAndOneFailedPassDisqualifies) {
  // Two passes. At 4 KiB rd has the single fastest row (1e-4) but the
  // higher mean (5.5e-4 against hd's 2e-4): hd. At 1 MiB ring is faster on
  // average, but one of its rows FAILED, so hd (the better of the rest).
  const std::vector<std::vector<BenchRowReport>> runs = {
      {Row(4096, "ring", 9e-4), Row(1 << 20, "ring", 1e-3)},
      {Row(4096, "hd", 2e-4), Row(1 << 20, "hd", 3e-3)},
      {Row(4096, "rd", 1e-4), Row(1 << 20, "rd", 4e-3)},
      {Row(4096, "rd", 1e-3), Row(1 << 20, "rd", 4e-3)},
      {Row(4096, "hd", 2e-4), Row(1 << 20, "hd", 3e-3)},
      {Row(4096, "ring", 9e-4), Row(1 << 20, "ring", 1e-3, /*ok=*/false)}};
  const std::string text = TuningLines(2, runs);
  absl::StatusOr<TuningTable> table = TuningTable::Parse(text, "tune");
  ASSERT_TRUE(table.ok()) << table.status() << "\n" << text;
  EXPECT_EQ(table->Choose(2, 4096), AllreduceAlgorithm::kHalvingDoubling) << text;
  EXPECT_EQ(table->Choose(2, 1 << 20), AllreduceAlgorithm::kHalvingDoubling) << text;
  EXPECT_EQ(table->rules().size(), 1u) << text;
  // The means behind the choice are in the file, failures named.
  EXPECT_NE(text.find("# 4096 B: hd 200.0 us, rd 550.0 us, ring 900.0 us"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ring FAILED"), std::string::npos) << text;
}

// A --tune job that failed has no rows; it still counts, as FAILED at every
// size, so its algorithm cannot win on the passes that succeeded.
TEST(BenchTune, AFailedJobRulesItsAlgorithmOutAtEverySize) {
  v1::Job failed;
  failed.set_id("j-9");
  failed.set_state(v1::FAILED);
  const std::vector<BenchRowReport> rows =
      TuningRowsOf(failed, v1::ALGORITHM_HALVING_DOUBLING, {4096, 1 << 20});
  ASSERT_EQ(rows.size(), 2u);
  for (const BenchRowReport& r : rows) {
    EXPECT_EQ(r.algorithm, "hd");
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("j-9"), std::string::npos) << r.error;
  }
  // hd's other pass was fastest everywhere, but the failed one rules it out.
  const std::vector<std::vector<BenchRowReport>> runs = {
      {Row(4096, "ring", 9e-4), Row(1 << 20, "ring", 2e-3)},
      {Row(4096, "hd", 1e-4), Row(1 << 20, "hd", 1e-3)},
      rows};
  const std::string text = TuningLines(4, runs);
  absl::StatusOr<TuningTable> table = TuningTable::Parse(text, "tune");
  ASSERT_TRUE(table.ok()) << table.status() << "\n" << text;
  EXPECT_EQ(table->Choose(4, 4096), AllreduceAlgorithm::kRing) << text;
  EXPECT_EQ(table->Choose(4, 1 << 20), AllreduceAlgorithm::kRing) << text;
  EXPECT_NE(text.find("hd FAILED"), std::string::npos) << text;
}

}  // namespace
}  // namespace gradsync
