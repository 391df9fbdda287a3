// The /metrics endpoint over real HTTP on loopback (cpp-httplib's client).
#include "common/metrics/metrics_server.h"

#include <httplib.h>

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace gradsync {
namespace {

absl::Time Soon() { return absl::Now() + absl::Seconds(5); }

httplib::Client ClientFor(const std::string& address) {
  absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(address);
  EXPECT_TRUE(hp.ok()) << hp.status();
  httplib::Client c(hp->first, hp->second);
  c.set_connection_timeout(5);
  c.set_read_timeout(5);
  return c;
}

TEST(MetricsServer, ServesTheRegistryAndNothingElse) {
  MetricsRegistry r;
  Counter* c = r.AddCounter("t_requests_total", "Requests.");
  c->Add(7);
  MetricsServer server(&r);
  absl::StatusOr<std::string> addr = server.Start("127.0.0.1:0", Soon());
  ASSERT_TRUE(addr.ok()) << addr.status();
  httplib::Client client = ClientFor(*addr);

  httplib::Result res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_TRUE(absl::StartsWith(res->get_header_value("Content-Type"),
                               "text/plain; version=0.0.4"));
  EXPECT_TRUE(absl::StrContains(res->body, "t_requests_total 7\n")) << res->body;

  c->Add(1);  // every scrape renders afresh
  res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_TRUE(absl::StrContains(res->body, "t_requests_total 8\n")) << res->body;

  res = client.Get("/");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  res = client.Post("/metrics", "x", "text/plain");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  server.Stop();
  server.Stop();  // idempotent
  EXPECT_FALSE(client.Get("/metrics"));
}

TEST(MetricsServer, BusyPortIsAnErrorNotACrash) {
  MetricsRegistry r;
  MetricsServer first(&r);
  absl::StatusOr<std::string> addr = first.Start("127.0.0.1:0", Soon());
  ASSERT_TRUE(addr.ok()) << addr.status();
  MetricsServer second(&r);
  absl::StatusOr<std::string> again = second.Start(*addr, Soon());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable) << again.status();
  second.Stop();  // nothing to stop
}

TEST(MetricsServer, MalformedAddressIsInvalidArgument) {
  MetricsRegistry r;
  MetricsServer server(&r);
  EXPECT_EQ(server.Start("localhost", Soon()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(server.Start("localhost:99999", Soon()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MetricsServer, SplitsHostAndPort) {
  auto v4 = SplitHostPort("0.0.0.0:9090");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->first, "0.0.0.0");
  EXPECT_EQ(v4->second, 9090);
  auto v6 = SplitHostPort("[::1]:0");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->first, "::1");
  EXPECT_EQ(v6->second, 0);
  auto any = SplitHostPort(":9100");
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->first, "0.0.0.0");
}

}  // namespace
}  // namespace gradsync
