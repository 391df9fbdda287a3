// /metrics of real daemons: a server and two workers with --metrics_listen
// on free ports run a ring job and then a PS job, or a long job that is
// cancelled; the tests scrape every daemon (with cpp-httplib's client) during
// and after the jobs and check that the counters move and agree with each
// other.
#include <httplib.h>

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/grpc/grpc_util.h"
#include "common/metrics/metrics_server.h"
#include "tests/integration/cluster_fixture.h"

namespace gradsync {
namespace {

// The body of GET http://ADDRESS/metrics; a test failure and "" otherwise.
std::string Scrape(const std::string& address) {
  absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(address);
  EXPECT_TRUE(hp.ok()) << "metrics address '" << address << "'";
  if (!hp.ok()) return "";
  httplib::Client client(hp->first, hp->second);
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  httplib::Result res = client.Get("/metrics");
  EXPECT_TRUE(res && res->status == 200) << "scrape of " << address;
  return res && res->status == 200 ? res->body : "";
}

// The value of the sample written exactly as `sample` (name and labels);
// -1 when the scrape has no such line.
double Value(const std::string& text, const std::string& sample) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, sample) || !absl::ConsumePrefix(&line, " ")) {
      continue;
    }
    double v;
    return absl::SimpleAtod(line, &v) ? v : -1;
  }
  return -1;
}

// The sum over every label set of metric `name` (samples "name{...} v").
double Sum(const std::string& text, const std::string& name) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, name + "{")) continue;
    double v;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) sum += v;
  }
  return sum;
}

// Runs `spec` to the end, scraping worker 0 while it runs; returns the
// finished job.
v1::Job RunScraping(Cluster& c, const v1::JobSpec& spec) {
  v1::Job job;
  EXPECT_TRUE(c.Submit(spec, &job).ok());
  c.WaitFor(job.id(), absl::Seconds(30),
            [](const v1::Job& j) { return j.state() == v1::RUNNING || Terminal(j); });
  // A scrape in the middle of training answers (what it holds is timing).
  EXPECT_NE(Scrape(c->workers()[0].metrics), "");
  return c.WaitFor(job.id(), absl::Seconds(120), Terminal);
}

// `gradsync local --dashboard`: the launcher starts the server with the
// dashboard and learns its address; the page's API answers with the
// cluster's own token and refuses without it.
TEST(MetricsIntegration, ALocalClusterServesTheDashboardWithItsOwnToken) {
  LocalClusterOptions o;
  o.workers = 2;
  o.bin_dir = GRADSYNC_BIN_DIR;
  o.log_dir = TempDir();
  o.dashboard_listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<LocalCluster>> c = LocalCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string at = (*c)->server().dashboard;
  ASSERT_FALSE(at.empty());
  absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(at);
  ASSERT_TRUE(hp.ok()) << at;
  httplib::Client client(hp->first, hp->second);
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  httplib::Result refused = client.Get("/api/overview");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  const std::string token = (*c)->Token();
  ASSERT_GE(token.size(), 16u);
  httplib::Result ok =
      client.Get("/api/overview", {{"Authorization", absl::StrCat("Bearer ", token)}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_NE(ok->body.find("\"w1\""), std::string::npos) << ok->body;
  (*c)->Shutdown();
}

TEST(MetricsIntegration, CountersOfServerAndWorkersMoveWithRingAndPsJobs) {
  Cluster c(2, /*shards=*/1, /*metrics=*/true);
  ASSERT_TRUE(c.ok());
  const std::string server = c->server().metrics;
  ASSERT_FALSE(server.empty());
  std::string s = Scrape(server);
  EXPECT_EQ(Value(s, "gradsync_server_registered_workers"), 2) << s;
  EXPECT_EQ(Value(s, "gradsync_server_jobs_submitted_total"), 0) << s;

  v1::JobSpec ring = Spec("ring", "sync", 2);
  ring.set_steps(40);
  v1::Job done = RunScraping(c, ring);
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error();
  std::vector<std::string> w = {Scrape(c->workers()[0].metrics),
                                Scrape(c->workers()[1].metrics)};
  for (const std::string& text : w) {
    EXPECT_EQ(Value(text, "gradsync_worker_steps_total"), 40) << text;
    EXPECT_GT(Sum(text, "gradsync_worker_peer_sent_bytes_total"), 0) << text;
    EXPECT_GT(Value(text, "gradsync_worker_collective_seconds_count"), 0) << text;
    EXPECT_GE(Value(text, "gradsync_worker_exposed_comm_seconds_total"), 0);
    EXPECT_EQ(Value(text, "gradsync_worker_jobs_total{outcome=\"succeeded\"}"), 1);
    // Present; its value depends on timing (a write blocked for a second).
    EXPECT_GE(Value(text, "gradsync_worker_heartbeats_missed_total"), 0) << text;
    // The model's one bucket (0.9 MB) is below peer_bulk_bytes (4 MiB).
    EXPECT_GT(Value(text, "gradsync_worker_peer_streams_total{server=\"peer\"}"), 0)
        << text;
    EXPECT_EQ(Value(text, "gradsync_worker_peer_streams_total{server=\"bulk\"}"), 0)
        << text;
  }
  // What one rank sent the other received (payload bytes, both ways).
  EXPECT_EQ(Sum(w[0], "gradsync_worker_peer_sent_bytes_total"),
            Sum(w[1], "gradsync_worker_peer_received_bytes_total"));
  EXPECT_EQ(Sum(w[1], "gradsync_worker_peer_sent_bytes_total"),
            Sum(w[0], "gradsync_worker_peer_received_bytes_total"));

  v1::JobSpec ps = Spec("ps", "sync", 2);
  ps.set_steps(30);
  done = RunScraping(c, ps);
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error();
  s = Scrape(server);
  EXPECT_EQ(Value(s, "gradsync_server_jobs{state=\"SUCCEEDED\"}"), 2) << s;
  EXPECT_EQ(Value(s, "gradsync_server_jobs_finished_total{state=\"SUCCEEDED\"}"), 2);
  EXPECT_EQ(Value(s, "gradsync_server_jobs_submitted_total"), 2);
  EXPECT_EQ(Value(s, "gradsync_server_queue_length"), 0);
  // No partition size named, workers on one host: 1 MiB picked (common/
  // ps_layout.h), so each of the model's two buckets (137 KB, 804 KB) is one
  // partition, and every rank pushes every partition once per step.
  EXPECT_EQ(done.result().ps_partition_bytes(), 1 << 20);
  const double push_pulls = Value(s, "gradsync_ps_requests_total{method=\"push_pull\"}");
  EXPECT_EQ(push_pulls, 2 * 30 * 2) << s;
  // Each push was summed once, on a reaction (small) or a reduce thread.
  EXPECT_EQ(Value(s, "gradsync_ps_pushes_total{where=\"reaction\"}") +
                Value(s, "gradsync_ps_pushes_total{where=\"reduce_threads\"}"),
            push_pulls)
      << s;
  double worker_pushed = 0, worker_pulled = 0;
  for (const LocalCluster::Process& p : c->workers()) {
    const std::string text = Scrape(p.metrics);
    EXPECT_EQ(Value(text, "gradsync_worker_steps_total"), 40 + 30) << text;
    EXPECT_GT(Value(text, "gradsync_worker_ps_sent_bytes_total{shard=\"0\"}"), 0);
    EXPECT_GT(Value(text, "gradsync_worker_ps_push_pull_seconds_count"), 0);
    worker_pushed += Value(text, "gradsync_worker_ps_sent_bytes_total{shard=\"0\"}");
    worker_pulled += Value(text, "gradsync_worker_ps_received_bytes_total{shard=\"0\"}");
  }
  // The shard sees whole frames (headers too); the workers count payload.
  const double shard_received =
      Value(s, "gradsync_ps_received_bytes_total{method=\"push_pull\"}") +
      Value(s, "gradsync_ps_received_bytes_total{method=\"init\"}");
  const double shard_sent =
      Value(s, "gradsync_ps_sent_bytes_total{method=\"push_pull\"}") +
      Value(s, "gradsync_ps_sent_bytes_total{method=\"pull\"}");
  EXPECT_GE(shard_received, worker_pushed);
  EXPECT_LT(shard_received, worker_pushed * 1.01);
  EXPECT_GE(shard_sent, worker_pulled);
  EXPECT_LT(shard_sent, worker_pulled * 1.01);
  // Partitions over the server's --ps_inline_bytes (64 KiB) are summed on a
  // reduce thread; a job that names 64 KiB ones (3 + 13 of them) has the
  // shard sum them on the gRPC thread that read them, unless that slice is
  // busy.
  EXPECT_EQ(Value(s, "gradsync_ps_pushes_total{where=\"reaction\"}"), 0) << s;
  v1::JobSpec small = Spec("ps", "sync", 2);
  small.set_steps(10);
  small.set_ps_partition_bytes(64 << 10);
  done = RunScraping(c, small);
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error();
  EXPECT_EQ(done.result().ps_partition_bytes(), 64 << 10);
  s = Scrape(server);
  const double on_reaction = Value(s, "gradsync_ps_pushes_total{where=\"reaction\"}");
  EXPECT_GT(on_reaction, 0) << s;
  const double all = Value(s, "gradsync_ps_requests_total{method=\"push_pull\"}");
  EXPECT_EQ(all, push_pulls + 2 * 10 * 16) << s;
  EXPECT_EQ(on_reaction + Value(s, "gradsync_ps_pushes_total{where=\"reduce_threads\"}"),
            all)
      << s;
}

// `gradsync local`'s --ps_inline_bytes reaches the server and every extra
// shard: with 0, every push of a job in 64 KiB partitions over two shards
// is summed on the shards' reduce threads.
TEST(MetricsIntegration, ZeroInlineBytesSendEveryPushToTheReduceThreads) {
  Cluster c(2, /*shards=*/2, /*metrics=*/true, 6.0, "", /*ps_inline_bytes=*/0);
  ASSERT_TRUE(c.ok());
  v1::JobSpec spec = Spec("ps", "sync", 2);
  spec.set_steps(10);
  spec.set_ps_shards(2);
  spec.set_ps_partition_bytes(64 << 10);
  const v1::Job done = RunScraping(c, spec);
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error();
  std::vector<std::string> shards = {c->server().metrics};
  for (const LocalCluster::Process& p : c->shards()) shards.push_back(p.metrics);
  ASSERT_EQ(shards.size(), 2u);
  for (const std::string& address : shards) {
    const std::string s = Scrape(address);
    EXPECT_EQ(Value(s, "gradsync_ps_pushes_total{where=\"reaction\"}"), 0) << s;
    const double pushes = Value(s, "gradsync_ps_requests_total{method=\"push_pull\"}");
    EXPECT_GE(pushes, 2 * 10) << s;  // both ranks, every step, some partition
    EXPECT_EQ(Value(s, "gradsync_ps_pushes_total{where=\"reduce_threads\"}"), pushes)
        << s;
  }
}

// A bench job's small size travels to the workers' peer servers, its size of
// peer_bulk_bytes (the default, 4 MiB) to their bulk servers: the assignment
// carried the bulk addresses that the workers registered.
TEST(MetricsIntegration, LargeCollectivesReachTheBulkServers) {
  Cluster c(2, /*shards=*/0, /*metrics=*/true);
  ASSERT_TRUE(c.ok());
  v1::JobSpec spec;
  spec.set_kind(v1::JOB_KIND_BENCH);
  spec.set_workers(2);
  spec.mutable_bench()->set_op(v1::BENCH_OP_ALLREDUCE);
  spec.mutable_bench()->add_sizes(4096);
  spec.mutable_bench()->add_sizes(4 << 20);
  spec.mutable_bench()->set_iters(2);
  spec.mutable_bench()->set_warmup(1);
  v1::Job job;
  ASSERT_TRUE(c.Submit(spec, &job).ok());
  job = c.WaitFor(job.id(), absl::Seconds(60), Terminal);
  ASSERT_EQ(job.state(), v1::SUCCEEDED) << job.error();
  for (const LocalCluster::Process& p : c->workers()) {
    const std::string text = Scrape(p.metrics);
    EXPECT_GT(Value(text, "gradsync_worker_peer_streams_total{server=\"peer\"}"), 0)
        << text;
    EXPECT_GT(Value(text, "gradsync_worker_peer_streams_total{server=\"bulk\"}"), 0)
        << text;
  }
}

// Polls `address` until pred(scrape) or 60 s; returns the last scrape.
std::string ScrapeUntil(const std::string& address,
                        const std::function<bool(const std::string&)>& pred) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  std::string text = Scrape(address);
  while (!pred(text) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
    text = Scrape(address);
  }
  return text;
}

TEST(MetricsIntegration, CountersMoveWhileAJobRunsAndACancelIsCounted) {
  Cluster c(2, /*shards=*/1, /*metrics=*/true);
  ASSERT_TRUE(c.ok());
  v1::JobSpec spec = Spec("ring", "sync", 2);
  spec.set_epochs(50);  // far longer than the test
  v1::Job job;
  ASSERT_TRUE(c.Submit(spec, &job).ok());
  const std::string worker = c->workers()[0].metrics;
  const std::string steps = "gradsync_worker_steps_total";
  std::string first =
      ScrapeUntil(worker, [&](const std::string& t) { return Value(t, steps) > 0; });
  ASSERT_GT(Value(first, steps), 0) << first;
  EXPECT_GT(Sum(first, "gradsync_worker_peer_sent_bytes_total"), 0) << first;
  std::string later = ScrapeUntil(worker, [&](const std::string& t) {
    return Value(t, steps) > Value(first, steps);
  });
  EXPECT_GT(Value(later, steps), Value(first, steps)) << "steps did not move";
  std::string s = Scrape(c->server().metrics);
  EXPECT_EQ(Value(s, "gradsync_server_jobs{state=\"RUNNING\"}"), 1) << s;
  EXPECT_EQ(Value(s, "gradsync_server_busy_workers"), 2) << s;

  ASSERT_TRUE(c.Cancel(job.id(), &job).ok());
  EXPECT_EQ(c.WaitFor(job.id(), absl::Seconds(30), Terminal).state(), v1::CANCELLED);
  s = ScrapeUntil(c->server().metrics, [](const std::string& t) {
    return Value(t, "gradsync_server_busy_workers") == 0;
  });
  EXPECT_EQ(Value(s, "gradsync_server_jobs_finished_total{state=\"CANCELLED\"}"), 1) << s;
  // Both ranks count the job as cancelled, also the one whose peer stopped
  // first and broke its streams before the cancel reached it
  // (WorkerDaemon::ClassifyCancelledPeerFailure).
  for (const auto& d : c->workers()) {
    const std::string w = ScrapeUntil(d.metrics, [](const std::string& t) {
      return Value(t, "gradsync_worker_jobs_total{outcome=\"cancelled\"}") == 1;
    });
    EXPECT_EQ(Value(w, "gradsync_worker_jobs_total{outcome=\"cancelled\"}"), 1) << w;
    // -1: no such series yet (no failed job at all).
    EXPECT_LE(Value(w, "gradsync_worker_jobs_total{outcome=\"failed\"}"), 0) << w;
  }
}

TEST(MetricsIntegration, ABusyMetricsPortStopsTheDaemonWithAClearError) {
  MetricsRegistry registry;
  MetricsServer taken(&registry);
  absl::StatusOr<std::string> addr =
      taken.Start("127.0.0.1:0", absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(addr.ok()) << addr.status();
  const std::string dir = TempDir();
  for (const std::string& daemon :
       {std::string("gradsync-server --auth=none --listen=127.0.0.1:0"),
        std::string("gradsync-worker --auth=none --coordinator=127.0.0.1:1")}) {
    SCOPED_TRACE(daemon);
    const int rc =
        Shell(absl::StrCat(GRADSYNC_BIN_DIR, "/", daemon, " --metrics_listen=", *addr,
                           " 2> ", dir, "/err > /dev/null"),
              30);
    EXPECT_EQ(rc, 1);
    EXPECT_TRUE(absl::StrContains(Slurp(dir + "/err"),
                                  "--metrics_listen: metrics: cannot listen on"))
        << Slurp(dir + "/err");
  }
}

// Calls without the cluster token are counted where they are refused: a
// Coordinator call on the server, a Peer stream on a worker.
TEST(MetricsIntegration, AuthRefusalsAreCountedOnBothDaemons) {
  Cluster c(1, /*shards=*/1, /*metrics=*/true);
  ASSERT_TRUE(c.ok());
  const char kRefusals[] = "gradsync_auth_refusals_total";
  EXPECT_EQ(Value(Scrape(c->server().metrics), kRefusals), 0);
  EXPECT_EQ(Value(Scrape(c->workers()[0].metrics), kRefusals), 0);
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
    v1::ListJobsResponse resp;  // this process has no token (MakeChannel)
    EXPECT_EQ(v1::Coordinator::NewStub(MakeChannel(c->coordinator()))
                  ->ListJobs(&ctx, v1::ListJobsRequest(), &resp)
                  .error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
  auto stream = v1::Peer::NewStub(MakeChannel(c->workers()[0].address))->Stream(&ctx);
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Value(Scrape(c->server().metrics), kRefusals), 3);
  EXPECT_EQ(Value(Scrape(c->workers()[0].metrics), kRefusals), 1);
}

}  // namespace
}  // namespace gradsync
