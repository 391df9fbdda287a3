// common/metrics: a small metrics registry rendered in the Prometheus text
// exposition format (version 0.0.4), and (metrics_server.h) the HTTP endpoint
// that serves it.
//
// Counters, gauges and histograms with fixed buckets, each optionally split
// by labels. A daemon owns one MetricsRegistry and passes it (or handles
// taken from it) down to what it measures; nothing here is process-global,
// so two daemons in one test process keep separate numbers.
//
// Cost on the hot path: Counter::Add, Gauge::Set/Add and Histogram::Observe
// are lock-free atomics with no allocation. Labelled children are found under
// their family's mutex (Family::WithLabels), so callers look a child up once
// (per job, per peer) and keep the pointer, which stays valid for the
// registry's life.
//
// Families are exposed in registration order, children in label-value order.
#ifndef GRADSYNC_COMMON_METRICS_METRICS_H_
#define GRADSYNC_COMMON_METRICS_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gradsync {

enum class MetricType { kCounter, kGauge, kHistogram };

// A value that only goes up (bytes sent, steps run). Thread-safe, lock-free.
class Counter {
 public:
  // Adds v; a negative v is ignored (a counter never goes down).
  void Add(double v);
  void Increment() { Add(1); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down (queue length, samples/s). Thread-safe,
// lock-free.
class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Observations counted into fixed buckets (upper bounds, ascending; +Inf is
// implied), with their sum. Thread-safe, lock-free: Observe is one atomic
// increment plus an atomic add to the sum.
class Histogram {
 public:
  // `bounds` must be ascending and outlive the histogram (its family's).
  explicit Histogram(const std::vector<double>* bounds);

  void Observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (= count)
    double sum = 0;
    uint64_t count = 0;
  };
  // Buckets are read one by one while others may observe: a snapshot taken
  // during updates is consistent in itself (count = the +Inf bucket) but may
  // lag the sum by the observations in flight.
  Snapshot Read() const;

 private:
  const std::vector<double>& bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // per bucket, not cumulative
  std::atomic<double> sum_{0};
};

// Bucket bounds for latencies from 100 µs to 10 s (seconds).
std::vector<double> LatencyBuckets();

// Formats a sample value as Prometheus does: integers without exponent,
// otherwise the shortest representation that reads back exactly; +Inf, -Inf,
// NaN.
std::string FormatMetricValue(double v);

// Escapes a label value (backslash, double quote, newline).
std::string EscapeLabelValue(const std::string& v);

// What every family has; rendering is per type.
class MetricFamilyBase {
 public:
  MetricFamilyBase(std::string name, std::string help, MetricType type,
                   std::vector<std::string> label_names);
  virtual ~MetricFamilyBase() = default;

  const std::string& name() const { return name_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // Appends the HELP and TYPE lines and every sample.
  void Render(std::string* out) const;

 protected:
  // Appends the samples only.
  virtual void RenderSamples(std::string* out) const = 0;
  // `name{a="x",b="y"}` for these label values (and an extra label pair
  // such as le="0.1" when `extra` is not empty), or `name` without labels.
  std::string SampleName(const std::string& suffix,
                         const std::vector<std::string>& values,
                         const std::string& extra = "") const;

 private:
  const std::string name_;
  const std::string help_;
  const MetricType type_;
  const std::vector<std::string> label_names_;
};

// Counters, gauges or histograms of one name, one child per combination of
// label values. Thread-safe.
template <typename T>
class MetricFamily final : public MetricFamilyBase {
 public:
  MetricFamily(std::string name, std::string help, MetricType type,
               std::vector<std::string> label_names,
               std::function<std::unique_ptr<T>()> make)
      : MetricFamilyBase(std::move(name), std::move(help), type, std::move(label_names)),
        make_(std::move(make)) {}

  // The child for these label values (as many as label names; missing ones
  // are empty, extra ones dropped), created on first use. Takes the family's
  // mutex and may allocate: call it once and keep the pointer.
  T* WithLabels(std::vector<std::string> values) {
    values.resize(label_names().size());
    absl::MutexLock lock(&mu_);
    std::unique_ptr<T>& child = children_[values];
    if (!child) child = make_();
    return child.get();
  }

 protected:
  void RenderSamples(std::string* out) const override;

 private:
  const std::function<std::unique_ptr<T>()> make_;
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> children_ ABSL_GUARDED_BY(mu_);
};

// Rendering per child type (metrics.cc).
template <>
void MetricFamily<Counter>::RenderSamples(std::string* out) const;
template <>
void MetricFamily<Gauge>::RenderSamples(std::string* out) const;
template <>
void MetricFamily<Histogram>::RenderSamples(std::string* out) const;

using CounterFamily = MetricFamily<Counter>;
using GaugeFamily = MetricFamily<Gauge>;
using HistogramFamily = MetricFamily<Histogram>;

// A sample computed when the registry is rendered (see AddCallback).
struct MetricSample {
  std::vector<std::string> label_values;
  double value = 0;
};

// The metrics of one daemon. Thread-safe: families may be added and rendered
// concurrently with updates.
//
// Names follow Prometheus conventions (snake_case, unit suffix such as
// _seconds or _bytes, counters ending in _total). A name may be registered
// once: registering it again is a programming error; the second family then
// works but is not exposed (assert in debug builds).
class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  Counter* AddCounter(const std::string& name, const std::string& help);
  CounterFamily* AddCounterFamily(const std::string& name, const std::string& help,
                                  std::vector<std::string> label_names);
  Gauge* AddGauge(const std::string& name, const std::string& help);
  GaugeFamily* AddGaugeFamily(const std::string& name, const std::string& help,
                              std::vector<std::string> label_names);
  Histogram* AddHistogram(const std::string& name, const std::string& help,
                          std::vector<double> bounds);
  HistogramFamily* AddHistogramFamily(const std::string& name, const std::string& help,
                                      std::vector<std::string> label_names,
                                      std::vector<double> bounds);

  // A counter or gauge family whose samples `collect` computes at every
  // render (e.g. jobs by state, read from the job table). `collect` runs on
  // the rendering thread without this registry's lock held; it may take its
  // own locks, but must not call back into the registry.
  void AddCallback(const std::string& name, const std::string& help, MetricType type,
                   std::vector<std::string> label_names,
                   std::function<std::vector<MetricSample>()> collect);

  // The text exposition of every family.
  std::string Render() const;

 private:
  // Takes ownership of `family` and returns it; exposes it unless its name
  // is taken.
  template <typename F>
  F* Register(std::unique_ptr<F> family);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<MetricFamilyBase>> families_ ABSL_GUARDED_BY(mu_);
  std::vector<const MetricFamilyBase*> exposed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_METRICS_METRICS_H_
