// The merged Chrome trace of a job: well-formed JSON, one process per rank,
// thread names, one common time origin, and the --trace_file naming rule.
#include "client/trace_json.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace gradsync {
namespace {

v1::TraceEvent Ev(const char* name, int thread, int64_t start, int64_t dur, int64_t step,
                  int bucket, int layer) {
  v1::TraceEvent e;
  e.set_name(name);
  e.set_category("c");
  e.set_thread(thread);
  e.set_start_us(start);
  e.set_dur_us(dur);
  e.set_step(step);
  e.set_bucket(bucket);
  e.set_layer(layer);
  return e;
}

v1::Job TwoRankJob() {
  v1::Job job;
  job.set_id("j-1");
  for (int r = 0; r < 2; ++r) {
    v1::WorkerTrace* t = job.mutable_result()->add_traces();
    t->set_rank(r);
    t->set_worker_id(r == 0 ? "w-a" : "w-\"b\"");  // quoted in the JSON
    *t->add_events() = Ev("backward", 0, 1000 + r, 50, 3, -1, 1);
    *t->add_events() = Ev("sync bucket", 2, 1020 + r, 80, 3, 0, -1);
    *t->add_events() = Ev("bucket ready", 0, 1010, -1, 3, 0, -1);
  }
  job.mutable_result()->mutable_traces(1)->set_dropped(4);
  return job;
}

TEST(TraceJsonTest, MergedTraceIsWellFormedChromeTrace) {
  const nlohmann::json j = nlohmann::json::parse(MergedTrace(TwoRankJob()).dump());
  ASSERT_TRUE(j["traceEvents"].is_array());
  int complete = 0, instant = 0;
  bool rank1_named = false, sync_thread_named = false;
  for (const nlohmann::json& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "X") {
      ++complete;
      EXPECT_GE(e["ts"].get<int64_t>(), 0);
      EXPECT_TRUE(e.contains("dur"));
    } else if (ph == "i") {
      ++instant;
    } else if (e["name"] == "process_name" && e["pid"] == 1) {
      rank1_named = e["args"]["name"] == "rank 1 (w-\"b\")";
    } else if (e["name"] == "thread_name" && e["tid"] == 2) {
      sync_thread_named = e["args"]["name"] == "comm: sync";
    }
  }
  EXPECT_EQ(complete, 4);
  EXPECT_EQ(instant, 2);
  EXPECT_TRUE(rank1_named);
  EXPECT_TRUE(sync_thread_named);
  EXPECT_EQ(j["otherData"]["dropped_events_per_rank"]["1"], 4);
}

TEST(TraceJsonTest, AnElasticJobsCoordinatorLaneHasItsOwnNames) {
  v1::Job job = TwoRankJob();
  v1::WorkerTrace* t = job.mutable_result()->add_traces();
  t->set_rank(-1);
  t->set_worker_id("coordinator");
  *t->add_events() = Ev("generation 0: 4 ranks from step 0", 0, 900, 100, 0, -1, -1);
  *t->add_events() = Ev("re-formation: 7 steps redone", 1, 1000, 30, 40, -1, -1);
  const nlohmann::json j = nlohmann::json::parse(MergedTrace(job).dump());
  std::set<std::string> names;
  for (const nlohmann::json& e : j["traceEvents"]) {
    if (e["pid"] != -1 || e["ph"] != "M") continue;
    if (e["name"] == "process_name" || e["name"] == "thread_name") {
      names.insert(e["args"]["name"].get<std::string>());
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"coordinator: elastic generations",
                                          "generations", "re-formations"}));
}

TEST(TraceJsonTest, OneTimeOriginAndNamedArgs) {
  const nlohmann::json j = MergedTrace(TwoRankJob());
  for (const nlohmann::json& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["pid"] == 0 && e["args"].contains("layer")) {
      EXPECT_EQ(e["ts"], 0);  // the job's first event
      EXPECT_EQ(e["name"], "backward L1");
      EXPECT_FALSE(e["args"].contains("bucket"));
    }
    if (e["pid"] == 1 && e["args"].contains("bucket")) {
      EXPECT_EQ(e["ts"], 21);  // rank 1's offset is kept
      EXPECT_EQ(e["name"], "sync bucket b0");
      EXPECT_EQ(e["args"]["step"], 3);
    }
  }
}

TEST(TraceJsonTest, UntracedJobIsAnError) {
  v1::Job job;
  job.set_id("j-2");
  EXPECT_EQ(WriteTrace(job, "/tmp/never-written.json").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TraceJsonTest, TracePathRule) {
  EXPECT_EQ(TracePath("", "j-3", false), "trace-j-3.json");
  EXPECT_EQ(TracePath("", "j-3", true), "trace-j-3.json");
  EXPECT_EQ(TracePath("/tmp/t.json", "j-3", false), "/tmp/t.json");
  EXPECT_EQ(TracePath("/tmp/t.json", "j-3", true), "/tmp/t-j-3.json");
  EXPECT_EQ(TracePath("/tmp/t", "j-3", true), "/tmp/t-j-3.json");
}

}  // namespace
}  // namespace gradsync
