// Integration: which allreduce algorithm auto runs, end to end through the
// CLI and real daemons: a worker's --tuning_file, a job's own table
// (JobSpec.tuning_table, `submit --tuning_file`) and `local --autotune`.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/spec/job_spec.h"
#include "common/spec/tuning_table.h"
#include "tests/integration/cluster_fixture.h"

namespace gradsync {
namespace {

// `gradsync local bench --tuning_file` hands the table to the workers it
// starts: a table that says "tree for everything" (the old spelling of rd,
// still read) makes auto pick rd at a
// size where the built-in table picks another algorithm; a bf16 wire still
// verifies (the bench's integer patterns are exact in bf16 up to 8 ranks).
TEST(Integration, LocalBenchPassesTheTuningFileAndTheWireDtypeToWorkers) {
  const std::string dir = TempDir();
  {
    std::ofstream table(dir + "/tuning.txt");
    table << "# every size, every world size\n* inf tree\n";
  }
  const std::string out = dir + "/out.txt";
  const int rc =
      Shell(absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync local bench --workers=2",
                         " --op=allreduce --algorithm=auto --sizes=16M --iters=2",
                         " --warmup=1 --wire_dtype=bf16 --tuning_file=", dir,
                         "/tuning.txt --results=", dir, "/r.json --log_dir=", dir, " > ",
                         out, " 2>&1"),
            120);
  ASSERT_EQ(rc, 0) << Slurp(out);
  nlohmann::json r = nlohmann::json::parse(Slurp(dir + "/r.json"));
  EXPECT_EQ(r["wire_dtype"], "bf16");
  ASSERT_EQ(r["rows"].size(), 1u);
  EXPECT_EQ(r["rows"][0]["algorithm"], "rd") << Slurp(out);
  EXPECT_EQ(r["rows"][0]["ok"], true) << Slurp(out);
}

// `gradsync submit --tuning_file` sends the table with the job
// (JobSpec.tuning_table): workers started without it choose by it. At N=2
// the built-in table picks rd for both of the default model's buckets; a
// table of "hd everywhere" makes them hd. A table that does not parse is
// refused before anything is submitted, naming the flag.
TEST(Integration, SubmittedTuningTableDecidesWhatAutoRuns) {
  Cluster c(2, /*shards=*/1);
  ASSERT_TRUE(c.ok());
  const std::string dir = TempDir();
  const std::string bin = GRADSYNC_BIN_DIR;
  {
    std::ofstream table(dir + "/hd.txt");
    table << "# every size, every world size\n* inf hd\n";
    std::ofstream bad(dir + "/bad.txt");
    bad << "2 1KiB warp\n";
  }
  for (const bool with_table : {false, true}) {
    const std::string r = dir + (with_table ? "/hd.json" : "/builtin.json");
    const int rc =
        Shell(absl::StrCat(bin, "/gradsync submit ", c.CliFlags(),
                           " --strategy=allreduce --workers=2 --steps=3 --wait",
                           with_table ? absl::StrCat(" --tuning_file=", dir, "/hd.txt")
                                      : std::string(),
                           " --results=", r, " > ", dir, "/submit.txt 2>&1"),
              120);
    ASSERT_EQ(rc, 0) << Slurp(dir + "/submit.txt");
    nlohmann::json j = nlohmann::json::parse(Slurp(r));
    ASSERT_EQ(j["bucket_algorithms"].size(), 2u) << j.dump();
    for (const auto& algorithm : j["bucket_algorithms"]) {
      EXPECT_EQ(algorithm, with_table ? "hd" : "rd") << j.dump();
    }
  }
  EXPECT_EQ(Shell(absl::StrCat(bin, "/gradsync submit ", c.CliFlags(),
                               " --strategy=allreduce --workers=2 --steps=3",
                               " --tuning_file=", dir, "/bad.txt 2> ", dir, "/err.txt"),
                  30),
            2);
  EXPECT_NE(Slurp(dir + "/err.txt").find("--tuning_file: "), std::string::npos)
      << Slurp(dir + "/err.txt");
  EXPECT_NE(Slurp(dir + "/err.txt").find("warp"), std::string::npos)
      << Slurp(dir + "/err.txt");
}

// `gradsync local` with a ring job and --algorithm=auto first runs short
// allreduce-sync trials with ring, hd and rd on its cluster (--autotune) and
// says which had the least communication per step; every bucket of the job
// then runs that one (checked by LocalCompareFourPairs..., whose `local`
// autotunes by default). With --autotune=false nothing is tried and the
// workers' (built-in) table chooses.
TEST(Integration, LocalAutotuneFalseTriesNothingAndTheBuiltInTableChooses) {
  const std::string dir = TempDir();
  const std::string out = dir + "/out.txt";
  const int rc =
      Shell(absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync local --strategy=allreduce",
                         " --workers=2 --steps=3 --autotune=false --results=", dir,
                         "/r.json --log_dir=", dir, " > ", out, " 2>&1"),
            180);
  const std::string text = Slurp(out);
  ASSERT_EQ(rc, 0) << text;
  EXPECT_EQ(text.find("autotune:"), std::string::npos) << text;
  nlohmann::json j = nlohmann::json::parse(Slurp(dir + "/r.json"));
  EXPECT_EQ(j["steps"], 3) << j.dump();
  ASSERT_EQ(j["bucket_bytes"].size(), 2u) << j.dump();
  ASSERT_EQ(j["bucket_algorithms"].size(), 2u) << j.dump();
  for (int b = 0; b < 2; ++b) {
    const uint64_t bytes = j["bucket_bytes"][b].get<uint64_t>();
    EXPECT_EQ(
        j["bucket_algorithms"][b].get<std::string>(),
        std::string(AllreduceAlgorithmName(TuningTable::Default().Choose(2, bytes))))
        << "bucket " << b << " of " << bytes << " bytes\n"
        << text;
  }
}

// `bench --tune` runs ring, hd and rd --tune_passes times each, in
// alternating order, and writes a table that parses and names, for every
// size, an algorithm that ran there; the results hold every run. A pass
// count out of range is refused before anything runs.
TEST(Integration, BenchTuneRunsEveryPassAndWritesATableThatParses) {
  const std::string dir = TempDir();
  const std::string out = dir + "/out.txt";
  const int rc =
      Shell(absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync local bench --workers=2",
                         " --sizes=4K,64K --iters=2 --warmup=1 --tune_passes=2",
                         " --tune=", dir, "/table.txt --results=", dir,
                         "/r.json --log_dir=", dir, " > ", out, " 2>&1"),
            180);
  ASSERT_EQ(rc, 0) << Slurp(out);
  nlohmann::json r = nlohmann::json::parse(Slurp(dir + "/r.json"));
  ASSERT_EQ(r["runs"].size(), 6u) << r.dump();
  const std::vector<std::string> order = {"ring", "hd", "rd", "rd", "hd", "ring"};
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(r["runs"][i]["algorithm_requested"], order[i]) << i;
    ASSERT_EQ(r["runs"][i]["rows"].size(), 2u) << i;
  }
  const std::string text = Slurp(dir + "/table.txt");
  absl::StatusOr<TuningTable> table = TuningTable::Parse(text, "table.txt");
  ASSERT_TRUE(table.ok()) << table.status() << "\n" << text;
  for (const int64_t bytes : {int64_t{4096}, int64_t{65536}}) {
    const AllreduceAlgorithm a = table->Choose(2, bytes);
    EXPECT_TRUE(a == AllreduceAlgorithm::kRing ||
                a == AllreduceAlgorithm::kHalvingDoubling ||
                a == AllreduceAlgorithm::kRecursiveDoubling)
        << bytes << "\n"
        << text;
  }
  const int bad =
      Shell(absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync local bench --workers=2",
                         " --sizes=4K --tune_passes=0 --tune=", dir, "/t2.txt > ", out,
                         " 2>&1"),
            60);
  EXPECT_EQ(bad, 2) << Slurp(out);
  EXPECT_NE(Slurp(out).find("tune_passes"), std::string::npos) << Slurp(out);
}

}  // namespace
}  // namespace gradsync
