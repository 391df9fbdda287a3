// The comparison table's explanation names what the ring jobs really ran.
#include "client/report.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {
namespace {

v1::Job Finished(v1::Strategy strategy, double samples_per_second,
                 const std::vector<std::string>& algorithms) {
  v1::Job j;
  j.set_state(v1::SUCCEEDED);
  j.mutable_spec()->set_strategy(strategy);
  j.mutable_spec()->set_mode(v1::SYNC_MODE_SYNC);
  j.mutable_spec()->set_workers(4);
  v1::JobResult* r = j.mutable_result();
  r->set_samples_per_second(samples_per_second);
  r->set_num_params(250000);  // K = 1.00 MB
  r->set_steps(100);
  r->set_comm_seconds(0.4);
  for (const std::string& a : algorithms) r->add_bucket_algorithms(a);
  return j;
}

TEST(CompareTable, WhyDescribesTheAlgorithmsTheRingJobsRan) {
  const std::string tree =
      CompareTable({Finished(v1::STRATEGY_PS, 100, {}),
                    Finished(v1::STRATEGY_ALLREDUCE, 200, {"rd", "rd"})});
  // N = 4: log2 4 = 2 exchanges of the whole 1 MB vector, 2 MB sent.
  EXPECT_NE(tree.find("rd (recursive doubling): 2 sequential exchanges of "
                      "the whole vector, 2.00 MB sent per worker"),
            std::string::npos)
      << tree;
  EXPECT_NE(tree.find("a ring allreduce would take 6 hops"), std::string::npos) << tree;
  EXPECT_NE(tree.find("N*K = 4.00 MB"), std::string::npos) << tree;

  // Results written before the rename say "tree": still described.
  const std::string mixed =
      CompareTable({Finished(v1::STRATEGY_PS, 100, {}),
                    Finished(v1::STRATEGY_ALLREDUCE, 200, {"tree", "hd"})});
  EXPECT_NE(mixed.find("rd (recursive doubling)"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("hd (halving-doubling): 4 sequential exchanges, 1.50 MB"),
            std::string::npos)
      << mixed;

  // Jobs that report no algorithm (or ran the ring) are described as a ring.
  const std::string ring = CompareTable(
      {Finished(v1::STRATEGY_PS, 100, {}), Finished(v1::STRATEGY_ALLREDUCE, 200, {})});
  EXPECT_NE(ring.find("The allreduce jobs ran the ring: 2(N-1) = 6 sequential hops, "
                      "2(N-1)/N*K = 1.50 MB sent per worker"),
            std::string::npos)
      << ring;
}

}  // namespace
}  // namespace gradsync

namespace gradsync {
namespace {

// Every row's columns line up with the header's, however long the longest
// label ("allreduce-async(s=1,wp)" is wider than "strategy"'s 18).
TEST(CompareTable, ColumnsLineUpWithTheLongestLabel) {
  v1::Job wp = Finished(v1::STRATEGY_ALLREDUCE, 200, {});
  wp.mutable_spec()->set_mode(v1::SYNC_MODE_ASYNC);
  wp.mutable_spec()->set_staleness(1);
  wp.mutable_spec()->set_weight_prediction(v1::WEIGHT_PREDICTION_ON);
  const std::string table = CompareTable({Finished(v1::STRATEGY_PS, 100, {}), wp});
  std::vector<std::string> lines;
  for (size_t at = 0, end; (end = table.find('\n', at)) != std::string::npos;
       at = end + 1) {
    if (end == at) break;  // the table ends at its first empty line
    lines.push_back(table.substr(at, end - at));
  }
  ASSERT_EQ(lines.size(), 3u) << table;
  // The workers column is right-aligned: it ends where "workers" ends.
  const size_t end = lines[0].find("workers") + std::string("workers").size();
  EXPECT_EQ(lines[1].substr(end - 2, 2), " 4") << table;
  EXPECT_EQ(lines[2].substr(end - 2, 2), " 4") << table;
  EXPECT_EQ(lines[2].rfind("allreduce-async(s=1,wp) ", 0), 0u) << table;
}

TEST(HowItSynchronised, NamesEachBucketsAlgorithmAndWhy) {
  v1::Job j = Finished(v1::STRATEGY_ALLREDUCE, 200, {"hd", "rd"});
  j.mutable_result()->add_bucket_bytes(1 << 20);
  j.mutable_result()->add_bucket_bytes(4000);
  j.mutable_spec()->set_algorithm(v1::ALGORITHM_AUTO);
  EXPECT_EQ(HowItSynchronised(j),
            "allreduce: bucket 0 hd (1 MiB), bucket 1 rd (4.0 KB); auto: the workers' "
            "tuning table");
  EXPECT_EQ(JobToJson(j)["algorithm_source"], "table");
  j.mutable_spec()->set_tuning_table("4 inf ring\n");
  EXPECT_NE(HowItSynchronised(j).find("; auto: the job's own tuning table"),
            std::string::npos);
  EXPECT_EQ(JobToJson(j)["algorithm_source"], "tuned");
  j.mutable_spec()->set_algorithm(v1::ALGORITHM_HALVING_DOUBLING);
  EXPECT_NE(HowItSynchronised(j).find("; forced by --algorithm"), std::string::npos);
  EXPECT_EQ(JobToJson(j)["algorithm_source"], "forced");
}

TEST(HowItSynchronised, NamesAPsJobsPartitionsAndNothingBeforeResults) {
  v1::Job j = Finished(v1::STRATEGY_PS, 100, {});
  j.mutable_spec()->set_ps_shards(1);
  EXPECT_EQ(HowItSynchronised(j), "");           // no buckets reported yet
  j.mutable_result()->add_bucket_bytes(940200);  // 15 partitions of 64 KiB
  j.mutable_result()->set_ps_partition_bytes(64 << 10);
  EXPECT_EQ(HowItSynchronised(j), "ps: 15 partitions of at most 64 KiB over 1 shard");
  // The results file names the size the workers cut with, not the spec's 0.
  EXPECT_EQ(JobToJson(j)["ps_partition_bytes"], 64 << 10);
  EXPECT_EQ(JobToJson(j)["algorithm_source"], "");
}

}  // namespace
}  // namespace gradsync
