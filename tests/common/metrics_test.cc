// The metrics registry: exact text exposition of a small registry, value and
// label formatting, and updates from many threads.
#include "common/metrics/metrics.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace gradsync {
namespace {

TEST(Metrics, RendersASmallRegistryExactly) {
  MetricsRegistry r;
  Counter* steps = r.AddCounter("app_steps_total", "Steps run.");
  CounterFamily* bytes =
      r.AddCounterFamily("app_sent_bytes_total", "Bytes sent.", {"peer"});
  Gauge* queue = r.AddGauge("app_queue_length", "Jobs waiting.");
  Histogram* latency = r.AddHistogram("app_latency_seconds", "Call latency.", {0.1, 1});
  r.AddCallback("app_jobs", "Jobs by state.", MetricType::kGauge, {"state"}, [] {
    return std::vector<MetricSample>{{{"QUEUED"}, 2}, {{"RUNNING"}, 1}};
  });
  steps->Add(3);
  bytes->WithLabels({"2"})->Add(1024);
  bytes->WithLabels({"1"})->Add(4096);
  queue->Set(-1.5);
  latency->Observe(0.05);
  latency->Observe(0.5);
  latency->Observe(7);
  EXPECT_EQ(r.Render(),
            "# HELP app_steps_total Steps run.\n"
            "# TYPE app_steps_total counter\n"
            "app_steps_total 3\n"
            "# HELP app_sent_bytes_total Bytes sent.\n"
            "# TYPE app_sent_bytes_total counter\n"
            "app_sent_bytes_total{peer=\"1\"} 4096\n"
            "app_sent_bytes_total{peer=\"2\"} 1024\n"
            "# HELP app_queue_length Jobs waiting.\n"
            "# TYPE app_queue_length gauge\n"
            "app_queue_length -1.5\n"
            "# HELP app_latency_seconds Call latency.\n"
            "# TYPE app_latency_seconds histogram\n"
            "app_latency_seconds_bucket{le=\"0.1\"} 1\n"
            "app_latency_seconds_bucket{le=\"1\"} 2\n"
            "app_latency_seconds_bucket{le=\"+Inf\"} 3\n"
            "app_latency_seconds_sum 7.55\n"
            "app_latency_seconds_count 3\n"
            "# HELP app_jobs Jobs by state.\n"
            "# TYPE app_jobs gauge\n"
            "app_jobs{state=\"QUEUED\"} 2\n"
            "app_jobs{state=\"RUNNING\"} 1\n");
}

TEST(Metrics, LabelledHistogramPutsLeLast) {
  MetricsRegistry r;
  r.AddHistogramFamily("h_seconds", "H.", {"shard"}, {1})
      ->WithLabels({"0"})
      ->Observe(1);  // on the bound: counted in it
  EXPECT_EQ(r.Render(),
            "# HELP h_seconds H.\n"
            "# TYPE h_seconds histogram\n"
            "h_seconds_bucket{shard=\"0\",le=\"1\"} 1\n"
            "h_seconds_bucket{shard=\"0\",le=\"+Inf\"} 1\n"
            "h_seconds_sum{shard=\"0\"} 1\n"
            "h_seconds_count{shard=\"0\"} 1\n");
}

TEST(Metrics, EscapesLabelValuesAndHelp) {
  MetricsRegistry r;
  r.AddCounterFamily("c_total", "Back\\slash\nnewline.", {"a", "b"})
      ->WithLabels({"q\"uo\\te", "new\nline"})
      ->Increment();
  EXPECT_EQ(r.Render(),
            "# HELP c_total Back\\\\slash\\nnewline.\n"
            "# TYPE c_total counter\n"
            "c_total{a=\"q\\\"uo\\\\te\",b=\"new\\nline\"} 1\n");
}

TEST(Metrics, FormatsValues) {
  EXPECT_EQ(FormatMetricValue(0), "0");
  EXPECT_EQ(FormatMetricValue(123456789012), "123456789012");
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(0.00025), "0.00025");
  EXPECT_EQ(FormatMetricValue(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(FormatMetricValue(1e300), "1e+300");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::nan("")), "NaN");
}

TEST(Metrics, CounterIgnoresNegativeAdds) {
  MetricsRegistry r;
  Counter* c = r.AddCounter("c_total", "C.");
  c->Add(2);
  c->Add(-1);
  EXPECT_EQ(c->value(), 2);
}

TEST(Metrics, WithLabelsReturnsTheSameChild) {
  MetricsRegistry r;
  CounterFamily* f = r.AddCounterFamily("c_total", "C.", {"peer"});
  EXPECT_EQ(f->WithLabels({"1"}), f->WithLabels({"1"}));
  EXPECT_NE(f->WithLabels({"1"}), f->WithLabels({"2"}));
}

TEST(Metrics, ConcurrentUpdatesAreAllCounted) {
  MetricsRegistry r;
  Counter* c = r.AddCounter("c_total", "C.");
  Gauge* g = r.AddGauge("g", "G.");
  Histogram* h = r.AddHistogram("h_seconds", "H.", {0.5});
  CounterFamily* f = r.AddCounterFamily("f_total", "F.", {"peer"});
  constexpr int kThreads = 8;
  constexpr int kUpdates = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Counter* mine = f->WithLabels({std::to_string(t % 2)});
      for (int i = 0; i < kUpdates; ++i) {
        c->Add(1);
        g->Add(i % 2 ? 1 : -1);
        h->Observe(i % 2 ? 1.0 : 0.25);
        mine->Add(2);
        if (i % 1000 == 0) r.Render();  // scrapes race with updates
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(c->value(), kThreads * kUpdates);
  EXPECT_EQ(g->value(), 0);
  const Histogram::Snapshot s = h->Read();
  EXPECT_EQ(s.count, uint64_t{kThreads} * kUpdates);
  EXPECT_EQ(s.cumulative[0], uint64_t{kThreads} * kUpdates / 2);
  EXPECT_DOUBLE_EQ(s.sum, kThreads * kUpdates / 2 * 1.25);
  EXPECT_EQ(f->WithLabels({"0"})->value() + f->WithLabels({"1"})->value(),
            2.0 * kThreads * kUpdates);
}

}  // namespace
}  // namespace gradsync
