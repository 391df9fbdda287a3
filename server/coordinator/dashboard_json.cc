#include "server/coordinator/dashboard_json.h"

#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace gradsync {
namespace {

std::string Number(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.6g", v);
}

std::string ProtoJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(m, &out, options).ok()) return "null";
  return out;
}

// "name":[f(p) for p in points]
template <typename T, typename F>
std::string Column(absl::string_view name, const std::vector<T>& points, F f) {
  return absl::StrCat(
      JsonQuote(name), ":[",
      absl::StrJoin(points, ",",
                    [&f](std::string* out, const T& p) { absl::StrAppend(out, f(p)); }),
      "]");
}

std::string CurveJson(const std::vector<CurvePoint>& c) {
  return absl::StrCat(
      "{", Column("time_ms", c, [](const CurvePoint& p) { return p.time_ms; }), ",",
      Column("step", c, [](const CurvePoint& p) { return p.step; }), ",",
      Column("epoch", c, [](const CurvePoint& p) { return p.epoch; }), ",",
      Column("loss", c, [](const CurvePoint& p) { return Number(p.loss); }), ",",
      Column("samples_per_second", c,
             [](const CurvePoint& p) { return Number(p.samples_per_second); }),
      ",",
      Column("comm_ms_per_step", c,
             [](const CurvePoint& p) { return Number(p.comm_ms_per_step); }),
      ",",
      Column("compute_ms_per_step", c,
             [](const CurvePoint& p) { return Number(p.compute_ms_per_step); }),
      "}");
}

std::string PointJson(const CurvePoint& p) {
  return absl::StrCat("{\"time_ms\":", p.time_ms, ",\"step\":", p.step,
                      ",\"epoch\":", p.epoch, ",\"loss\":", Number(p.loss),
                      ",\"samples_per_second\":", Number(p.samples_per_second),
                      ",\"comm_ms_per_step\":", Number(p.comm_ms_per_step),
                      ",\"compute_ms_per_step\":", Number(p.compute_ms_per_step), "}");
}

std::string AccuracyJson(const std::vector<AccuracyPoint>& a) {
  return absl::StrCat(
      "{", Column("time_ms", a, [](const AccuracyPoint& p) { return p.time_ms; }), ",",
      Column("step", a, [](const AccuracyPoint& p) { return p.step; }), ",",
      Column("epoch", a, [](const AccuracyPoint& p) { return p.epoch; }), ",",
      Column("train_loss", a,
             [](const AccuracyPoint& p) { return Number(p.train_loss); }),
      ",",
      Column("test_accuracy", a,
             [](const AccuracyPoint& p) { return Number(p.test_accuracy); }),
      "}");
}

std::string RankJson(const JobLive& job, size_t r) {
  const RankProgress& p = job.ranks[r];
  auto at = [r](const std::vector<std::string>& v) {
    return r < v.size() ? v[r] : std::string();
  };
  const std::string worker =
      static_cast<int>(r) < job.job.workers_size() ? job.job.workers(r) : "";
  return absl::StrCat("{\"rank\":", r, ",\"worker_id\":", JsonQuote(worker),
                      ",\"host\":", JsonQuote(at(job.rank_hosts)),
                      ",\"updated_ms\":", p.updated_ms, ",\"step\":", p.step,
                      ",\"epoch\":", p.epoch, ",\"loss\":", Number(p.loss),
                      ",\"samples_per_second\":", Number(p.samples_per_second),
                      ",\"comm_seconds\":", Number(p.comm_seconds),
                      ",\"compute_seconds\":", Number(p.compute_seconds),
                      ",\"stall\":", JsonQuote(at(job.rank_stalls)), "}");
}

}  // namespace

std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  out.reserve(s.size() + 2);
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == '<' || c == '>') {
          out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string OverviewJson(const ClusterLive& cluster) {
  std::string out = absl::StrCat("{\"now_ms\":", cluster.now_ms,
                                 ",\"ps_shards\":", cluster.ps_shards, ",\"workers\":[");
  for (size_t i = 0; i < cluster.workers.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? "," : "", ProtoJson(cluster.workers[i]));
  }
  absl::StrAppend(&out, "],\"jobs\":[");
  for (size_t i = 0; i < cluster.jobs.size(); ++i) {
    const JobLive& j = cluster.jobs[i];
    absl::StrAppend(&out, i > 0 ? "," : "", "{\"job\":", ProtoJson(j.job),
                    ",\"latest\":", j.curve.empty() ? "null" : PointJson(j.curve.back()),
                    "}");
  }
  absl::StrAppend(&out, "]}");
  return out;
}

std::string JobJson(const JobLive& job) {
  std::string out = absl::StrCat(
      "{\"job\":", ProtoJson(job.job), ",\"curve_stride\":", job.curve_stride,
      ",\"curve\":", CurveJson(job.curve), ",\"accuracy\":", AccuracyJson(job.accuracy),
      ",\"ranks\":[");
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    absl::StrAppend(&out, r > 0 ? "," : "", RankJson(job, r));
  }
  absl::StrAppend(&out, "]}");
  return out;
}

}  // namespace gradsync
