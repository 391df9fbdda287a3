// --trace end to end: real daemons run a bucketed ring job submitted with the
// CLI; the merged Chrome trace it writes must show communication of an early
// bucket overlapping backward of an earlier layer in the same step (a
// structural check on the recorded spans, not a timing assertion).
#include <cstdint>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "tests/integration/cluster_fixture.h"

namespace gradsync {
namespace {

struct Span {
  int64_t begin, end;
  bool Overlaps(const Span& o) const { return begin < o.end && o.begin < end; }
  bool Contains(const Span& o) const { return begin <= o.begin && o.end <= end; }
};

Span SpanOf(const nlohmann::json& e) {
  const int64_t ts = e["ts"];
  return {ts, ts + e["dur"].get<int64_t>()};
}

// One rank's spans of the trace, by kind.
struct RankSpans {
  std::map<int64_t, Span> compute;             // step -> forward+backward
  std::vector<std::pair<int, Span>> backward;  // (layer, span)
  std::map<int64_t, Span> sync_bucket0;        // step -> sync of bucket 0
  int waits = 0, optimizer = 0, stages = 0;
};

std::map<int, RankSpans> Parse(const nlohmann::json& trace) {
  std::map<int, RankSpans> ranks;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    RankSpans& r = ranks[e["pid"].get<int>()];
    const nlohmann::json& args = e["args"];
    const std::string name = e["name"];
    if (name == "forward+backward") r.compute[args["step"]] = SpanOf(e);
    if (name.rfind("backward L", 0) == 0) {
      r.backward.emplace_back(args["layer"].get<int>(), SpanOf(e));
    }
    if (e["tid"] == 2 && args.value("bucket", -1) == 0) {
      r.sync_bucket0[args["step"]] = SpanOf(e);
    }
    r.waits += name == "wait comm";
    r.optimizer += name == "optimizer";
    r.stages += name == "stage batch";
  }
  return ranks;
}

// Steps in which bucket 0's synchronisation overlaps backward of a layer
// outside bucket 0 (layer < last) of the same step.
int OverlappingSteps(const RankSpans& r, int last_layer) {
  int steps = 0;
  for (const auto& [step, sync] : r.sync_bucket0) {
    auto c = r.compute.find(step);
    if (c == r.compute.end()) continue;
    for (const auto& [layer, bw] : r.backward) {
      if (layer < last_layer && c->second.Contains(bw) && sync.Overlaps(bw)) {
        ++steps;
        break;
      }
    }
  }
  return steps;
}

TEST(TraceIntegration, RingJobTraceShowsEarlyBucketCommOverlappingBackward) {
  Cluster c(2);
  ASSERT_TRUE(c.ok());
  const std::string dir = TempDir();
  const std::string bin = GRADSYNC_BIN_DIR;
  // 4 KiB buckets: each layer of mlp:784-256-128-10 is its own bucket.
  const int rc =
      Shell(absl::StrCat(bin, "/gradsync submit ", c.CliFlags(),
                         " --strategy=allreduce --mode=sync --workers=2 --steps=40",
                         " --batch_size=64 --bucket_bytes=4096 --trace --wait",
                         " --trace_file=", dir, "/t.json --results=", dir, "/r.json > ",
                         dir, "/out.txt 2>&1"),
            180);
  ASSERT_EQ(rc, 0) << Slurp(dir + "/out.txt");
  const nlohmann::json r = nlohmann::json::parse(Slurp(dir + "/r.json"));
  ASSERT_GE(r["bucket_bytes"].size(), 3u) << r.dump();
  const nlohmann::json trace = nlohmann::json::parse(Slurp(dir + "/t.json"));
  std::map<int, RankSpans> ranks = Parse(trace);
  ASSERT_EQ(ranks.size(), 2u);
  int overlapping = 0;
  for (const auto& [rank, spans] : ranks) {
    EXPECT_EQ(spans.compute.size(), 40u) << "rank " << rank;
    EXPECT_EQ(spans.sync_bucket0.size(), 40u) << "rank " << rank;
    EXPECT_EQ(spans.backward.size(), 40u * 3) << "rank " << rank;
    EXPECT_EQ(spans.optimizer, 40) << "rank " << rank;
    EXPECT_EQ(spans.waits, 40) << "rank " << rank;
    EXPECT_GE(spans.stages, 40) << "rank " << rank;
    overlapping += OverlappingSteps(spans, /*last_layer=*/2);
  }
  EXPECT_GT(overlapping, 0)
      << "no step where bucket 0's allreduce overlaps backward of layer 0/1";
  std::cout << "steps with bucket-0 comm overlapping backward: " << overlapping << " of "
            << 2 * 40 << "\n";
  // The coordinator keeps the timelines for GetJob only, not for ListJobs.
  v1::ListJobsResponse list;
  ASSERT_TRUE(c.List(&list).ok());
  ASSERT_EQ(list.jobs_size(), 1);
  EXPECT_EQ(list.jobs(0).result().traces_size(), 0);
  v1::Job job;
  ASSERT_TRUE(c.Get(list.jobs(0).id(), &job).ok());
  EXPECT_EQ(job.result().traces_size(), 2);
}

}  // namespace
}  // namespace gradsync
