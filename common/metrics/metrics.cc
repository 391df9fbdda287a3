#include "common/metrics/metrics.h"

#include <cassert>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gradsync {
namespace {

void AtomicAdd(std::atomic<double>* a, double v) {
  double old = a->load(std::memory_order_relaxed);
  while (!a->compare_exchange_weak(old, old + v, std::memory_order_relaxed)) {
  }
}

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// HELP text escapes backslash and newline only.
std::string EscapeHelp(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void AppendSample(std::string* out, const std::string& name, double v) {
  absl::StrAppend(out, name, " ", FormatMetricValue(v), "\n");
}

// A family whose samples are computed at render time.
class CallbackFamily final : public MetricFamilyBase {
 public:
  CallbackFamily(std::string name, std::string help, MetricType type,
                 std::vector<std::string> label_names,
                 std::function<std::vector<MetricSample>()> collect)
      : MetricFamilyBase(std::move(name), std::move(help), type, std::move(label_names)),
        collect_(std::move(collect)) {}

 protected:
  void RenderSamples(std::string* out) const override {
    for (MetricSample& s : collect_()) {
      s.label_values.resize(label_names().size());
      AppendSample(out, SampleName("", s.label_values), s.value);
    }
  }

 private:
  const std::function<std::vector<MetricSample>()> collect_;
};

}  // namespace

void Counter::Add(double v) {
  if (v > 0) AtomicAdd(&value_, v);
}

void Gauge::Add(double v) { AtomicAdd(&value_, v); }

Histogram::Histogram(const std::vector<double>* bounds)
    : bounds_(*bounds), counts_(new std::atomic<uint64_t>[bounds->size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i] = 0;
}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;  // a dozen bounds: linear
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(&sum_, v);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += counts_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(total);
  }
  s.count = total;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
}

std::string FormatMetricValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  for (int precision = 6; precision < 17; ++precision) {
    std::string s = absl::StrFormat("%.*g", precision, v);
    if (std::strtod(s.c_str(), nullptr) == v) return s;
  }
  return absl::StrFormat("%.17g", v);
}

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

MetricFamilyBase::MetricFamilyBase(std::string name, std::string help, MetricType type,
                                   std::vector<std::string> label_names)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)) {}

void MetricFamilyBase::Render(std::string* out) const {
  absl::StrAppend(out, "# HELP ", name_, " ", EscapeHelp(help_), "\n");
  absl::StrAppend(out, "# TYPE ", name_, " ", TypeName(type_), "\n");
  RenderSamples(out);
}

std::string MetricFamilyBase::SampleName(const std::string& suffix,
                                         const std::vector<std::string>& values,
                                         const std::string& extra) const {
  std::string s = absl::StrCat(name_, suffix);
  if (label_names_.empty() && extra.empty()) return s;
  s += "{";
  for (size_t i = 0; i < label_names_.size(); ++i) {
    absl::StrAppend(&s, i ? "," : "", label_names_[i], "=\"", EscapeLabelValue(values[i]),
                    "\"");
  }
  if (!extra.empty()) absl::StrAppend(&s, label_names_.empty() ? "" : ",", extra);
  return s + "}";
}

template <>
void MetricFamily<Counter>::RenderSamples(std::string* out) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [values, c] : children_) {
    AppendSample(out, SampleName("", values), c->value());
  }
}

template <>
void MetricFamily<Gauge>::RenderSamples(std::string* out) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [values, g] : children_) {
    AppendSample(out, SampleName("", values), g->value());
  }
}

template <>
void MetricFamily<Histogram>::RenderSamples(std::string* out) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [values, h] : children_) {
    const Histogram::Snapshot s = h->Read();
    for (size_t i = 0; i < s.cumulative.size(); ++i) {
      const std::string le =
          i < h->bounds().size() ? FormatMetricValue(h->bounds()[i]) : "+Inf";
      AppendSample(out, SampleName("_bucket", values, absl::StrCat("le=\"", le, "\"")),
                   static_cast<double>(s.cumulative[i]));
    }
    AppendSample(out, SampleName("_sum", values), s.sum);
    AppendSample(out, SampleName("_count", values), static_cast<double>(s.count));
  }
}

template <typename F>
F* MetricsRegistry::Register(std::unique_ptr<F> family) {
  F* f = family.get();
  absl::MutexLock lock(&mu_);
  bool taken = false;
  for (const MetricFamilyBase* e : exposed_) taken |= e->name() == f->name();
  assert(!taken && "metric name registered twice");
  if (!taken) exposed_.push_back(f);
  families_.push_back(std::move(family));
  return f;
}

CounterFamily* MetricsRegistry::AddCounterFamily(const std::string& name,
                                                 const std::string& help,
                                                 std::vector<std::string> label_names) {
  return Register(std::make_unique<CounterFamily>(
      name, help, MetricType::kCounter, std::move(label_names),
      [] { return std::make_unique<Counter>(); }));
}

Counter* MetricsRegistry::AddCounter(const std::string& name, const std::string& help) {
  return AddCounterFamily(name, help, {})->WithLabels({});
}

GaugeFamily* MetricsRegistry::AddGaugeFamily(const std::string& name,
                                             const std::string& help,
                                             std::vector<std::string> label_names) {
  return Register(std::make_unique<GaugeFamily>(
      name, help, MetricType::kGauge, std::move(label_names),
      [] { return std::make_unique<Gauge>(); }));
}

Gauge* MetricsRegistry::AddGauge(const std::string& name, const std::string& help) {
  return AddGaugeFamily(name, help, {})->WithLabels({});
}

HistogramFamily* MetricsRegistry::AddHistogramFamily(const std::string& name,
                                                     const std::string& help,
                                                     std::vector<std::string> label_names,
                                                     std::vector<double> bounds) {
  // The family's factory owns the bounds; children (destroyed first) refer
  // to them.
  auto shared = std::make_shared<const std::vector<double>>(std::move(bounds));
  return Register(std::make_unique<HistogramFamily>(
      name, help, MetricType::kHistogram, std::move(label_names),
      [shared] { return std::make_unique<Histogram>(shared.get()); }));
}

Histogram* MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                         std::vector<double> bounds) {
  return AddHistogramFamily(name, help, {}, std::move(bounds))->WithLabels({});
}

void MetricsRegistry::AddCallback(const std::string& name, const std::string& help,
                                  MetricType type, std::vector<std::string> label_names,
                                  std::function<std::vector<MetricSample>()> collect) {
  Register(std::make_unique<CallbackFamily>(name, help, type, std::move(label_names),
                                            std::move(collect)));
}

std::string MetricsRegistry::Render() const {
  std::vector<const MetricFamilyBase*> families;
  {
    absl::MutexLock lock(&mu_);
    families = exposed_;
  }
  // Families are never removed: rendering needs no registry lock, so a
  // callback may take locks of its own that are held while registering.
  std::string out;
  for (const MetricFamilyBase* f : families) f->Render(&out);
  return out;
}

}  // namespace gradsync
