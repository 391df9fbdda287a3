// The dashboard's server side: the bounded curves (job_curves.h) as the job
// table keeps them, the JSON, and the HTTP endpoint's authentication over
// real HTTP on loopback (cpp-httplib's client) against a fake source.
#include <httplib.h>

#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "common/metrics/metrics_server.h"
#include "server/coordinator/dashboard_assets.h"
#include "server/coordinator/dashboard_json.h"
#include "server/coordinator/dashboard_server.h"
#include "server/coordinator/job_curves.h"
#include "tests/server/job_table_test_util.h"

namespace gradsync {
namespace {

// ---------------------------------------------------------------- curves

TEST(DownsampledSeries, KeepsAtMostCapacityPointsSpreadOverTheWholeStream) {
  DownsampledSeries<int> s(8);
  for (int i = 0; i < 1000; ++i) {
    s.Add(i);
    ASSERT_LE(s.kept(), 8u);
    ASSERT_LE(s.bytes(), 8 * sizeof(int));
  }
  const std::vector<int> p = s.Points();
  ASSERT_GE(p.size(), 4u);  // at least capacity / 2 kept, plus the latest
  ASSERT_LE(p.size(), 9u);
  EXPECT_EQ(p.front(), 0);
  EXPECT_EQ(p.back(), 999);  // the latest is always shown
  for (size_t i = 1; i + 1 < p.size(); ++i) {
    EXPECT_EQ(p[i] - p[i - 1], s.stride()) << i;  // evenly spread
  }
  EXPECT_EQ(s.offered(), 1000);
  s.Clear();
  EXPECT_TRUE(s.Points().empty());
  EXPECT_EQ(s.bytes(), 0u);
}

TEST(DownsampledSeries, ShortStreamsAreKeptWhole) {
  DownsampledSeries<int> s(8);
  for (int i = 0; i < 8; ++i) s.Add(i);
  EXPECT_EQ(s.Points(), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(s.stride(), 1);
}

class DashboardTableTest : public JobTableTest {
 protected:
  v1::WorkerMessage::Progress Report(const std::string& id, int rank, int64_t step) {
    v1::WorkerMessage::Progress p;
    p.set_job_id(id);
    p.set_rank(rank);
    p.set_step(step);
    p.set_epoch(1);
    p.set_loss(2.0 / (1 + step));
    p.set_samples_per_second(100);
    p.set_comm_seconds(0.001 * step);     // 1 ms per step
    p.set_compute_seconds(0.003 * step);  // 3 ms per step
    return p;
  }
};

// A job reporting for days keeps at most kCurvePoints points, from its first
// report to its latest: the memory bound of docs/operations.md "Dashboard".
TEST_F(DashboardTableTest, ProgressHistoryIsBoundedWhateverTheJobsLength) {
  Join("w0");
  Join("w1");
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2));
  constexpr int64_t kReports = 200000;  // 0.5 s apart: 28 hours
  Decisions d;
  for (int64_t step = 1; step <= kReports; ++step) {
    env_.Advance(absl::Milliseconds(500));
    table_.HandleProgress("w0", Report(id, 0, step), &d);
    if (step % 7 == 0) table_.HandleProgress("w1", Report(id, 1, step - 1), &d);
  }
  absl::StatusOr<JobLive> live = table_.Live(id);
  ASSERT_TRUE(live.ok()) << live.status();
  ASSERT_LE(live->curve.size(), kCurvePoints + 1);
  ASSERT_GE(live->curve.size(), kCurvePoints / 2);
  EXPECT_EQ(live->curve.front().step, 1);
  EXPECT_EQ(live->curve.back().step, kReports);
  EXPECT_GT(live->curve_stride, 1);
  EXPECT_NEAR(live->curve.back().comm_ms_per_step, 1.0, 1e-6);
  EXPECT_NEAR(live->curve.back().compute_ms_per_step, 3.0, 1e-6);
  EXPECT_DOUBLE_EQ(live->curve.back().samples_per_second, 200);  // both ranks
  ASSERT_EQ(live->ranks.size(), 2u);
  EXPECT_EQ(live->ranks[0].step, kReports);
  EXPECT_EQ(live->ranks[1].step, kReports - kReports % 7 - 1);
  EXPECT_EQ(live->rank_hosts, (std::vector<std::string>{"w0:7000", "w1:7000"}));
}

TEST_F(DashboardTableTest, EpochsBecomeAccuracyPoints) {
  Join("w0");
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
  Decisions d;
  table_.HandleProgress("w0", Report(id, 0, 40), &d);
  v1::WorkerMessage::EpochDone e;
  e.set_job_id(id);
  e.set_rank(0);
  e.set_epoch(1);
  e.set_train_loss(0.5);
  e.set_test_accuracy(0.8);
  table_.HandleEpochDone("w0", e, &d);
  absl::StatusOr<JobLive> live = table_.Live(id);
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->accuracy.size(), 1u);
  EXPECT_EQ(live->accuracy[0].step, 40);
  EXPECT_DOUBLE_EQ(live->accuracy[0].test_accuracy, 0.8);
}

// Ended jobs keep their curves only while they are among the newest
// kMaxCurveJobs; the overview lists the newest ended jobs only.
TEST_F(DashboardTableTest, OldEndedJobsDropTheirCurves) {
  Join("w0");
  std::vector<std::string> ids;
  for (size_t i = 0; i < Retention::kMaxCurveJobs + 2; ++i) {
    const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
    Decisions d;
    table_.HandleProgress("w0", Report(id, 0, 5), &d);
    JobDone("w0", Done(id, 0));
    ASSERT_EQ(Job(id).state(), v1::SUCCEEDED);
    ids.push_back(id);
  }
  EXPECT_TRUE(table_.Live(ids[0])->curve.empty());
  EXPECT_TRUE(table_.Live(ids[1])->curve.empty());
  EXPECT_EQ(table_.Live(ids[2])->curve.size(), 1u);
  EXPECT_EQ(table_.Live(ids.back())->curve.size(), 1u);
  const std::vector<JobLive> listed = table_.Listing(3);
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(listed.back().job.id(), ids.back());
  EXPECT_EQ(listed.back().curve.size(), 1u);  // its latest point
  EXPECT_EQ(table_.Live("t-nope").status().code(), absl::StatusCode::kNotFound);
}

// ---------------------------------------------------------------- JSON

TEST(DashboardJson, QuotesAndWritesNonFiniteNumbersAsNull) {
  EXPECT_EQ(JsonQuote("a\"b\\c\n<x>\x01"), R"("a\"b\\c\n\u003cx\u003e\u0001")");
  JobLive live;
  live.job.set_id("j-1");
  live.job.mutable_spec()->set_strategy(v1::STRATEGY_ALLREDUCE);
  CurvePoint p;
  p.step = 3;
  p.loss = std::numeric_limits<double>::quiet_NaN();
  live.curve = {p};
  live.ranks.resize(1);
  live.rank_stalls = {"rank 0 waiting 2.0 s for rank 1"};
  const std::string json = JobJson(live);
  EXPECT_TRUE(absl::StrContains(json, R"("loss":[null])")) << json;
  EXPECT_TRUE(absl::StrContains(json, R"("step":[3])")) << json;
  EXPECT_TRUE(absl::StrContains(json, R"("strategy":"STRATEGY_ALLREDUCE")")) << json;
  EXPECT_TRUE(absl::StrContains(json, R"("stall":"rank 0 waiting 2.0 s for rank 1")"))
      << json;
}

// ---------------------------------------------------------------- HTTP

constexpr char kToken[] = "0123456789abcdef-dashboard-token";

class FakeSource : public DashboardSource {
 public:
  ClusterLive DashboardOverview(size_t max_ended) override {
    last_max_ended = max_ended;
    ClusterLive c;
    c.now_ms = 1234;
    c.ps_shards = 1;
    JobLive& j = c.jobs.emplace_back();
    j.job.set_id("j-7");
    j.job.set_state(v1::RUNNING);
    CurvePoint latest;
    latest.time_ms = 1000;
    latest.step = 5;
    latest.loss = 0.25;
    j.curve.push_back(latest);
    v1::WorkerInfo& w = c.workers.emplace_back();
    w.set_id("w0");
    w.set_peer_address("10.0.0.1:7000");
    w.set_state("busy");
    return c;
  }
  absl::StatusOr<JobLive> DashboardJob(const std::string& id) override {
    if (id != "j-7") return absl::NotFoundError("no job " + id);
    JobLive j;
    j.job.set_id(id);
    for (int s = 1; s <= 3; ++s) {
      CurvePoint p;
      p.step = s;
      j.curve.push_back(p);
    }
    return j;
  }
  size_t last_max_ended = 0;
};

class DashboardServerTest : public ::testing::Test {
 protected:
  void Start(const std::string& token) {
    server_ = std::make_unique<DashboardServer>(&source_, DashboardOptions{token});
    absl::StatusOr<std::string> at =
        server_->Start("127.0.0.1:0", absl::Now() + absl::Seconds(5));
    ASSERT_TRUE(at.ok()) << at.status();
    absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(*at);
    ASSERT_TRUE(hp.ok());
    client_ = std::make_unique<httplib::Client>(hp->first, hp->second);
    client_->set_connection_timeout(5);
    client_->set_read_timeout(5);
  }

  httplib::Result Get(const std::string& path, httplib::Headers headers = {}) {
    return client_->Get(path.c_str(), headers);
  }

  FakeSource source_;
  std::unique_ptr<DashboardServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(DashboardServerTest, EveryPathNeedsTheToken) {
  Start(kToken);
  for (const char* path :
       {"/", "/assets/dashboard.js", "/api/overview", "/api/jobs/j-7", "/nothing"}) {
    httplib::Result res = Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 401) << path;
    EXPECT_FALSE(absl::StrContains(res->body, "j-7")) << path;
  }
  httplib::Result wrong =
      Get("/api/overview", {{"Authorization", "Bearer not-the-token"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(wrong->body, R"({"error":"missing or invalid cluster token"})");
  httplib::Result bad_cookie =
      Get("/api/overview", {{"Cookie", std::string(kDashboardCookie) + "=" + kToken}});
  ASSERT_TRUE(bad_cookie);
  EXPECT_EQ(bad_cookie->status, 401);  // the cookie is not the token itself
  httplib::Result bad_query = Get("/?token=wrong");
  ASSERT_TRUE(bad_query);
  EXPECT_EQ(bad_query->status, 401);
}

TEST_F(DashboardServerTest, BearerTokenOpensTheJsonEndpoints) {
  Start(kToken);
  const httplib::Headers bearer = {{"Authorization", std::string("Bearer ") + kToken}};
  httplib::Result overview = Get("/api/overview", bearer);
  ASSERT_TRUE(overview);
  EXPECT_EQ(overview->status, 200);
  EXPECT_EQ(overview->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(overview->get_header_value("Cache-Control"), "no-store");
  EXPECT_TRUE(absl::StartsWith(overview->body, R"({"now_ms":1234,"ps_shards":1,)"))
      << overview->body;
  EXPECT_TRUE(absl::StrContains(overview->body, R"("id":"j-7")")) << overview->body;
  EXPECT_TRUE(absl::StrContains(overview->body, R"("state":"RUNNING")"));
  EXPECT_TRUE(absl::StrContains(overview->body, R"("loss":0.25)"));
  EXPECT_TRUE(absl::StrContains(overview->body, R"("peer_address":"10.0.0.1:7000")"));
  EXPECT_EQ(source_.last_max_ended, kDashboardEndedJobs);

  httplib::Result job = Get("/api/jobs/j-7", bearer);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->status, 200);
  EXPECT_TRUE(absl::StrContains(job->body, R"("step":[1,2,3])")) << job->body;
  httplib::Result missing = Get("/api/jobs/j-8", bearer);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->body, R"({"error":"no job j-8"})");
}

// A browser: ?token= once answers 303 with an HttpOnly cookie (not the token)
// and a Location without the token; the cookie then opens every path.
TEST_F(DashboardServerTest, TokenInTheAddressSetsAnHttpOnlyCookie) {
  Start(kToken);
  httplib::Result res = Get(std::string("/?token=") + kToken);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 303);
  EXPECT_EQ(res->get_header_value("Location"), "/");
  const std::string cookie = res->get_header_value("Set-Cookie");
  EXPECT_TRUE(absl::StrContains(cookie, "HttpOnly")) << cookie;
  EXPECT_TRUE(absl::StrContains(cookie, "SameSite=Strict")) << cookie;
  EXPECT_FALSE(absl::StrContains(cookie, kToken)) << cookie;
  const std::string value = DashboardCookieValue(kToken);
  EXPECT_TRUE(absl::StartsWith(cookie, std::string(kDashboardCookie) + "=" + value));

  const httplib::Headers jar = {
      {"Cookie", "other=1; " + std::string(kDashboardCookie) + "=" + value}};
  httplib::Result page = Get("/", jar);
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_TRUE(absl::StartsWith(page->get_header_value("Content-Type"), "text/html"));
  EXPECT_TRUE(absl::StrContains(page->body, "/assets/uPlot.iife.min.js"));
  EXPECT_EQ(page->get_header_value("X-Frame-Options"), "DENY");
  httplib::Result js = Get("/assets/uPlot.iife.min.js", jar);
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_TRUE(absl::StartsWith(js->get_header_value("Content-Type"), "text/javascript"));
  EXPECT_GT(js->body.size(), 10000u);
  httplib::Result overview = Get("/api/overview", jar);
  ASSERT_TRUE(overview);
  EXPECT_EQ(overview->status, 200);
  httplib::Result nothing = Get("/assets/missing.js", jar);
  ASSERT_TRUE(nothing);
  EXPECT_EQ(nothing->status, 404);

  // A token on a path that would leave the server goes to "/": "//host",
  // and what browsers read as it ("/\\host", "/<tab>/host"; issue 51).
  for (const char* path : {"//evil.example/", "/%5Cevil.example/", "/%09/evil.example/",
                           "/%5C%5Cevil.example/", "/a%0d%0aSet-Cookie:x/"}) {
    httplib::Result away = Get(std::string(path) + "?token=" + kToken);
    ASSERT_TRUE(away) << path;
    EXPECT_EQ(away->status, 303) << path;
    EXPECT_EQ(away->get_header_value("Location"), "/") << path;
  }
  // A path of the dashboard is kept.
  httplib::Result kept = Get(std::string("/assets/app.js?token=") + kToken);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->get_header_value("Location"), "/assets/app.js");
}

TEST_F(DashboardServerTest, WithoutAClusterTokenItIsOpen) {
  Start("");
  httplib::Result res = Get("/api/overview");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST(DashboardAssets, PageScriptStyleAndChartLibraryAreEmbedded) {
  for (const char* name : {"index.html", "dashboard.js", "dashboard.css",
                           "uPlot.iife.min.js", "uPlot.min.css"}) {
    const DashboardAsset* a = FindDashboardAsset(name);
    ASSERT_NE(a, nullptr) << name;
    EXPECT_GT(a->size, 100u) << name;
  }
  EXPECT_EQ(FindDashboardAsset("LICENSE"), nullptr);
}

}  // namespace
}  // namespace gradsync
