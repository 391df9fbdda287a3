#include "client/bench_command.h"

#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/job_watch.h"
#include "client/local_cluster.h"
#include "client/report.h"
#include "common/cost_model.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/security.h"
#include "common/ps_layout.h"
#include "common/spec/job_spec.h"
#include "gradsync/v1/gradsync.grpc.pb.h"

namespace gradsync {
namespace {

absl::Status BadSizes(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("sizes: ", what));
}

// Appends LO, 2·LO, 4·LO, ... <= HI.
absl::Status AppendRange(absl::string_view item, std::vector<int64_t>* out) {
  std::vector<absl::string_view> ends = absl::StrSplit(item, ':');
  if (ends.size() != 2) return BadSizes(absl::StrCat("'", item, "' is not LO:HI"));
  absl::StatusOr<int64_t> lo = ParseByteCount(ends[0]);
  if (!lo.ok()) return lo.status();
  absl::StatusOr<int64_t> hi = ParseByteCount(ends[1]);
  if (!hi.ok()) return hi.status();
  if (*lo <= 0) return BadSizes(absl::StrCat("range '", item, "' starts at 0"));
  if (*lo > *hi) return BadSizes(absl::StrCat("range '", item, "' has LO > HI"));
  for (int64_t s = *lo; s <= *hi && out->size() <= kMaxBenchSizes; s *= 2) {
    out->push_back(s);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> ParseByteCount(absl::string_view text) {
  const std::string t = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  size_t digits = 0;
  while (digits < t.size() && std::isdigit(static_cast<unsigned char>(t[digits]))) {
    ++digits;
  }
  const std::string suffix = t.substr(digits);
  static const std::map<std::string, int64_t> kMultiple = {
      {"", 1},          {"K", 1 << 10}, {"KIB", 1 << 10}, {"M", 1 << 20},
      {"MIB", 1 << 20}, {"G", 1 << 30}, {"GIB", 1 << 30}};
  auto m = kMultiple.find(suffix);
  int64_t value = 0;
  if (digits == 0 || digits > 12 || m == kMultiple.end() ||
      !absl::SimpleAtoi(t.substr(0, digits), &value)) {
    return BadSizes(absl::StrCat("'", text,
                                 "' is not a byte count (digits with an "
                                 "optional K, M or G)"));
  }
  return value * m->second;
}

absl::StatusOr<std::vector<int64_t>> ParseBenchSizes(absl::string_view text) {
  std::vector<int64_t> sizes;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) return BadSizes(absl::StrCat("empty item in '", text, "'"));
    if (absl::StrContains(item, ':')) {
      absl::Status st = AppendRange(item, &sizes);
      if (!st.ok()) return st;
      continue;
    }
    absl::StatusOr<int64_t> bytes = ParseByteCount(item);
    if (!bytes.ok()) return bytes.status();
    sizes.push_back(*bytes);
  }
  if (sizes.size() > static_cast<size_t>(kMaxBenchSizes)) {
    return BadSizes(absl::StrCat("more than ", kMaxBenchSizes, " sizes"));
  }
  for (int64_t s : sizes) {
    if (s <= 0 || s % 4 != 0) {
      return BadSizes(absl::StrCat(s,
                                   " bytes is not a positive multiple of 4 "
                                   "(float32 elements)"));
    }
    if (s > kMaxBenchBytes) {
      return BadSizes(
          absl::StrCat(s, " bytes is over the cap of ", kMaxBenchBytes, " (1G)"));
    }
  }
  return sizes;
}

double BusBandwidthFactor(v1::BenchOp op, int workers, int ps_shards, int64_t bytes,
                          int64_t partition_bytes) {
  const double n = std::max(1, workers);
  switch (op) {
    case v1::BENCH_OP_ALLREDUCE:
      return 2.0 * (n - 1) / n;
    case v1::BENCH_OP_PUSHPULL:
      return PushPullLinkFactor(workers, ps_shards, bytes, partition_bytes);
    default:
      return 1.0;
  }
}

CostInputs LinkInputs(const v1::BenchResult& b, int workers) {
  CostInputs in;
  in.world = workers;
  if (b.host_groups_size() == workers) {
    in.groups.assign(b.host_groups().begin(), b.host_groups().end());
  }
  in.alpha = b.alpha_seconds();
  in.beta = b.beta_bytes_per_second();
  if (b.has_between_hosts() && b.between_hosts().beta_bytes_per_second() > 0) {
    in.alpha = b.between_hosts().alpha_seconds();
    in.beta = b.between_hosts().beta_bytes_per_second();
  }
  if (b.has_inside_host() && b.inside_host().beta_bytes_per_second() > 0) {
    in.local_alpha = b.inside_host().alpha_seconds();
    in.local_beta = b.inside_host().beta_bytes_per_second();
  }
  return in;
}

std::vector<BenchRowReport> BenchRows(const v1::Job& job) {
  const v1::BenchResult& b = job.result().bench();
  const v1::JobSpec& spec = job.spec();
  std::vector<BenchRowReport> rows;
  // Whether the workers shared one host (as they decided it: OnOneHost of
  // their peer addresses), from the host groups they reported.
  bool one_host = b.host_groups_size() > 0;
  for (int g : b.host_groups()) one_host = one_host && g == b.host_groups(0);
  for (const v1::BenchRow& r : b.rows()) {
    BenchRowReport row;
    row.bytes = r.bytes();
    row.algorithm = r.algorithm();
    row.time_seconds = r.time_seconds();
    row.ok = r.ok();
    row.error = r.error();
    if (row.time_seconds > 0) row.algbw = row.bytes / row.time_seconds;
    if (spec.bench().op() == v1::BENCH_OP_PUSHPULL) {
      // The spec's size, or (0) the one the workers picked for this size
      // (MakeJobPsLayout, worker/sync/ps_partitions.h).
      row.ps_partition_bytes = static_cast<int64_t>(ResolvePsPartitionBytes(
          spec.ps_partition_bytes(), {Range{0, static_cast<size_t>(row.bytes / 4)}},
          std::max(1, spec.ps_shards()), spec.workers(), one_host));
    }
    row.busbw = row.algbw * BusBandwidthFactor(spec.bench().op(), spec.workers(),
                                               spec.ps_shards(), row.bytes,
                                               row.ps_partition_bytes);
    CostInputs in = LinkInputs(b, spec.workers());
    in.bytes = row.bytes;
    in.ps_shards = std::max(1, spec.ps_shards());
    in.ps_partition_bytes = row.ps_partition_bytes;
    in.segment_bytes = std::max<int64_t>(4, spec.chunk_bytes());
    absl::StatusOr<v1::Algorithm> algorithm = ParseAlgorithm(row.algorithm);
    absl::StatusOr<double> model = PredictSeconds(
        spec.bench().op(), algorithm.ok() ? *algorithm : v1::ALGORITHM_RING, in);
    if (model.ok()) row.model_seconds = *model;
    if (row.time_seconds > 0) row.ratio = row.model_seconds / row.time_seconds;
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string FormatBenchTable(const v1::Job& job,
                             const std::vector<BenchRowReport>& rows) {
  const v1::JobSpec& spec = job.spec();
  const v1::BenchResult& b = job.result().bench();
  // Ranks 0 and 1's link; when the groups gave a second link, both, and
  // the rest of the header on a line of its own.
  std::string links =
      absl::StrFormat("alpha %.2f us, beta %.3f GB/s (ranks 0-1 ping-pong)",
                      b.alpha_seconds() * 1e6, b.beta_bytes_per_second() / 1e9);
  const char* then = "; ";
  if (b.has_between_hosts() && b.has_inside_host()) {
    const auto link = [](const v1::BenchLink& l) {
      return absl::StrFormat(
          "alpha %.2f us, beta %.3f GB/s (ranks %d-%d "
          "ping-pong)",
          l.alpha_seconds() * 1e6, l.beta_bytes_per_second() / 1e9, l.rank_a(),
          l.rank_b());
    };
    links = absl::StrCat("between hosts ", link(b.between_hosts()), ", inside a host ",
                         link(b.inside_host()), ", host groups ",
                         absl::StrJoin(b.host_groups(), ","));
    then = "\n# ";
  }
  std::string out = absl::StrFormat(
      "# %s, algorithm %s, %d workers%s%s, %d iters (+%d warmup), job %s\n"
      "# %s%stime = median "
      "over iterations of the slowest rank; %%model = model time / time\n",
      BenchOpName(spec.bench().op()), AlgorithmName(spec.algorithm()), spec.workers(),
      spec.bench().op() == v1::BENCH_OP_PUSHPULL
          ? absl::StrCat(", ", spec.ps_shards(), " PS shards")
          : "",
      spec.wire_dtype() == v1::WIRE_DTYPE_BF16 || spec.wire_dtype() == v1::WIRE_DTYPE_FP16
          ? absl::StrCat(", ", WireDtypeName(spec.wire_dtype()), " on the wire")
          : "",
      spec.bench().iters(), spec.bench().warmup(), job.id(), links, then);
  absl::StrAppendFormat(&out, "%12s %6s %11s %11s %11s %11s %7s %6s\n", "size(B)", "algo",
                        "time(us)", "algbw(GB/s)", "busbw(GB/s)", "model(us)", "%model",
                        "check");
  for (const BenchRowReport& r : rows) {
    absl::StrAppendFormat(&out, "%12d %6s %11.1f %11.3f %11.3f %11.1f %6.1f%% %6s\n",
                          r.bytes, r.algorithm, r.time_seconds * 1e6, r.algbw / 1e9,
                          r.busbw / 1e9, r.model_seconds * 1e6, 100 * r.ratio,
                          r.ok ? "OK" : "FAILED");
    if (!r.ok) absl::StrAppend(&out, "#   ", r.bytes, " bytes: ", r.error, "\n");
  }
  return out;
}

nlohmann::json BenchToJson(const v1::Job& job, const std::vector<BenchRowReport>& rows) {
  const v1::JobSpec& spec = job.spec();
  const v1::BenchResult& b = job.result().bench();
  nlohmann::json j;
  j["job_id"] = job.id();
  j["state"] = v1::JobState_Name(job.state());
  j["error"] = JobErrorText(job);
  j["op"] = BenchOpName(spec.bench().op());
  j["algorithm_requested"] = AlgorithmName(spec.algorithm());
  j["wire_dtype"] = spec.wire_dtype() == v1::WIRE_DTYPE_UNSPECIFIED
                        ? "fp32"
                        : WireDtypeName(spec.wire_dtype());
  j["workers"] = spec.workers();
  j["ps_shards"] = spec.bench().op() == v1::BENCH_OP_PUSHPULL ? spec.ps_shards() : 0;
  j["ps_partition_bytes"] =
      spec.bench().op() == v1::BENCH_OP_PUSHPULL ? spec.ps_partition_bytes() : 0;
  j["iters"] = spec.bench().iters();
  j["warmup"] = spec.bench().warmup();
  j["alpha_seconds"] = b.alpha_seconds();
  j["beta_bytes_per_second"] = b.beta_bytes_per_second();
  const auto link = [](bool has, const v1::BenchLink& l) {
    if (!has) return nlohmann::json(nullptr);
    return nlohmann::json{{"ranks", {l.rank_a(), l.rank_b()}},
                          {"alpha_seconds", l.alpha_seconds()},
                          {"beta_bytes_per_second", l.beta_bytes_per_second()}};
  };
  j["between_hosts"] = link(b.has_between_hosts(), b.between_hosts());
  j["inside_host"] = link(b.has_inside_host(), b.inside_host());
  j["host_groups"] = std::vector<int>(b.host_groups().begin(), b.host_groups().end());
  j["ratio_is"] = "model_seconds / time_seconds";
  j["rows"] = nlohmann::json::array();
  const int iters = b.iters();
  for (size_t i = 0; i < rows.size() && i < static_cast<size_t>(b.rows_size()); ++i) {
    const BenchRowReport& r = rows[i];
    const v1::BenchRow& raw = b.rows(static_cast<int>(i));
    nlohmann::json row = {{"bytes", r.bytes},
                          {"algorithm", r.algorithm},
                          {"time_seconds", r.time_seconds},
                          {"algbw", r.algbw},
                          {"busbw", r.busbw},
                          {"model_seconds", r.model_seconds},
                          {"ratio", r.ratio},
                          {"ps_partition_bytes", r.ps_partition_bytes},
                          {"ok", r.ok},
                          {"error", r.error}};
    row["iteration_seconds"] = std::vector<double>(raw.iteration_seconds().begin(),
                                                   raw.iteration_seconds().end());
    nlohmann::json per_rank = nlohmann::json::array();
    for (int at = 0; iters > 0 && at + iters <= raw.rank_iteration_seconds_size();
         at += iters) {
      per_rank.push_back(
          std::vector<double>(raw.rank_iteration_seconds().begin() + at,
                              raw.rank_iteration_seconds().begin() + at + iters));
    }
    row["rank_iteration_seconds"] = per_rank;
    j["rows"].push_back(std::move(row));
  }
  return j;
}

std::string TuningLines(int world, const std::vector<std::vector<BenchRowReport>>& runs) {
  struct Score {
    double sum = 0;
    int rows = 0;
    bool failed = false;
  };
  // By bytes (ascending), then algorithm.
  std::map<int64_t, std::map<std::string, Score>> scores;
  for (const std::vector<BenchRowReport>& run : runs) {
    for (const BenchRowReport& r : run) {
      Score& s = scores[r.bytes][r.algorithm];
      if (!r.ok || r.time_seconds <= 0) {
        s.failed = true;
        continue;
      }
      s.sum += r.time_seconds;
      ++s.rows;
    }
  }
  std::map<int64_t, std::string> best;  // by bytes, ascending
  std::string means;                    // a comment line per size: every algorithm's mean
  for (const auto& [bytes, by_algorithm] : scores) {
    double best_mean = 0;
    absl::StrAppend(&means, "# ", bytes, " B:");
    const char* sep = " ";
    for (const auto& [algorithm, s] : by_algorithm) {
      if (s.failed || s.rows == 0) {
        absl::StrAppend(&means, sep, algorithm, " FAILED");
        sep = ", ";
        continue;
      }
      const double mean = s.sum / s.rows;
      absl::StrAppend(&means, sep, algorithm, absl::StrFormat(" %.1f us", mean * 1e6));
      sep = ", ";
      if (best.count(bytes) == 0 || mean < best_mean) {
        best[bytes] = algorithm;
        best_mean = mean;
      }
    }
    absl::StrAppend(&means, "\n");
  }
  std::string out = absl::StrCat(
      "# gradsync bench --tune: fastest allreduce per size (mean over the "
      "runs) for ",
      world, " workers\n", means, "# WORLD MAX_BYTES ALGORITHM\n");
  for (auto it = best.begin(); it != best.end(); ++it) {
    auto next = std::next(it);
    // A size's rule is implied by the next one when both chose the same.
    if (next != best.end() && next->second == it->second) continue;
    absl::StrAppend(&out, world, " ",
                    next == best.end() ? "inf" : absl::StrCat(it->first), " ", it->second,
                    "\n");
  }
  return out;
}

std::vector<BenchRowReport> TuningRowsOf(const v1::Job& job, v1::Algorithm requested,
                                         const std::vector<int64_t>& sizes) {
  if (job.state() == v1::SUCCEEDED) return BenchRows(job);
  std::vector<BenchRowReport> rows;
  for (int64_t bytes : sizes) {
    BenchRowReport r;
    r.bytes = bytes;
    r.algorithm = AlgorithmName(requested);
    r.ok = false;
    r.error = absl::StrCat("job ", job.id(), " ", v1::JobState_Name(job.state()));
    rows.push_back(std::move(r));
  }
  return rows;
}

namespace {

v1::JobSpec BenchSpecOf(const BenchCommandOptions& o, v1::Algorithm algorithm) {
  v1::JobSpec s;
  s.set_name(absl::StrCat("bench ", BenchOpName(o.op)));
  s.set_kind(v1::JOB_KIND_BENCH);
  s.set_workers(o.workers);
  s.set_ps_shards(o.ps_shards);
  s.set_ps_partition_bytes(o.ps_partition_bytes);
  s.set_algorithm(algorithm);
  s.set_chunk_bytes(o.chunk_bytes);
  s.set_step_timeout_ms(o.step_timeout_ms);
  s.set_connections_per_peer(o.connections_per_peer);
  s.set_peer_bulk_bytes(o.peer_bulk_bytes);
  s.set_wire_dtype(o.wire_dtype);
  s.set_groups(o.groups);
  v1::BenchSpec* b = s.mutable_bench();
  b->set_op(o.op);
  for (int64_t bytes : o.sizes) b->add_sizes(bytes);
  b->set_iters(o.iters);
  b->set_warmup(o.warmup);
  return s;
}

// A bench job's event as a line: progress as "size D/T done".
std::string BenchEventLine(const v1::JobEvent& ev, const std::string& label) {
  if (ev.kind() != v1::JobEvent::PROGRESS) return EventLine(ev, label);
  return absl::StrFormat("[%s %s] size %d/%d done", ev.job_id(), label, ev.step(),
                         ev.total_steps());
}

// Streams job `id`'s events (printed unless quiet) until it ends, then reads
// the final job (WatchToEnd). On Ctrl-C cancels the job: CANCELLED.
absl::StatusOr<v1::Job> WatchBench(v1::Coordinator::Stub* stub, const std::string& id,
                                   const std::string& label, bool quiet,
                                   const CommandHooks& hooks) {
  WatchHooks watch;
  watch.on_event = [&label, quiet](const v1::JobEvent& ev) {
    const std::string line = quiet ? "" : BenchEventLine(ev, label);
    if (!line.empty()) std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  watch.set_context = hooks.set_watch_context;
  watch.interrupted = hooks.interrupted;
  absl::StatusOr<WatchEnd> end = WatchToEnd(stub, id, watch);
  if (!end.ok()) return end.status();
  if (end->interrupted) {
    return absl::CancelledError(absl::StrCat("interrupted; cancelled ", id));
  }
  return std::move(end->job);
}

// Submits one bench job and watches it to its end.
absl::StatusOr<v1::Job> RunOneBench(v1::Coordinator::Stub* stub,
                                    const BenchCommandOptions& o, v1::Algorithm algorithm,
                                    const CommandHooks& hooks) {
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(10)));
  v1::SubmitJobRequest req;
  *req.mutable_spec() = BenchSpecOf(o, algorithm);
  v1::Job job;
  grpc::Status st = stub->SubmitJob(&ctx, req, &job);
  if (!st.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                        absl::StrCat("submit: ", st.error_message()));
  }
  const std::string label =
      absl::StrCat("bench ", BenchOpName(o.op), " ", AlgorithmName(algorithm));
  return WatchBench(stub, job.id(), label, o.quiet, hooks);
}

// Prints a finished job's table (or its error); true when it succeeded and
// every row is OK.
bool ReportBench(const v1::Job& job, std::vector<BenchRowReport>* rows) {
  *rows = BenchRows(job);
  if (job.state() != v1::SUCCEEDED) {
    std::printf("%s %s: %s\n", job.id().c_str(), v1::JobState_Name(job.state()).c_str(),
                JobErrorText(job).c_str());
    return false;
  }
  std::printf("%s", FormatBenchTable(job, *rows).c_str());
  return std::all_of(rows->begin(), rows->end(),
                     [](const BenchRowReport& r) { return r.ok; });
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// The bench (one job, or ring/hd/rd with --tune) against `server`;
// writes the results and tuning files. Returns the exit code.
int BenchAgainst(const std::string& server, const BenchCommandOptions& o,
                 const CommandHooks& hooks) {
  auto channel = MakeChannel(server);
  if (!WaitForConnected(channel.get(), server, absl::Now() + absl::Seconds(3)).ok()) {
    std::fprintf(stderr, "gradsync: cannot reach the coordinator at %s\n",
                 server.c_str());
    return 1;
  }
  auto stub = v1::Coordinator::NewStub(channel);
  std::vector<v1::Algorithm> algorithms = {o.algorithm};
  if (!o.tune.empty()) {
    // Pass after pass, ring-hd-rd then rd-hd-ring, so that a load that
    // drifts during the passes favours no algorithm by its place.
    const std::vector<v1::Algorithm> order = {v1::ALGORITHM_RING,
                                              v1::ALGORITHM_HALVING_DOUBLING,
                                              v1::ALGORITHM_RECURSIVE_DOUBLING};
    algorithms.clear();
    for (int pass = 0; pass < o.tune_passes; ++pass) {
      if (pass % 2 == 0) {
        algorithms.insert(algorithms.end(), order.begin(), order.end());
      } else {
        algorithms.insert(algorithms.end(), order.rbegin(), order.rend());
      }
    }
  }
  int rc = 0;
  nlohmann::json runs = nlohmann::json::array();
  std::vector<std::vector<BenchRowReport>> all_rows;
  for (v1::Algorithm algorithm : algorithms) {
    absl::StatusOr<v1::Job> job = RunOneBench(stub.get(), o, algorithm, hooks);
    if (!job.ok()) {
      std::fprintf(stderr, "gradsync: %s\n", job.status().ToString().c_str());
      return absl::IsCancelled(job.status())         ? 130
             : absl::IsInvalidArgument(job.status()) ? 2
                                                     : 1;
    }
    std::vector<BenchRowReport> rows;
    if (!ReportBench(*job, &rows)) rc = 1;
    runs.push_back(BenchToJson(*job, rows));
    all_rows.push_back(TuningRowsOf(*job, algorithm, o.sizes));
  }
  if (!o.results.empty()) {
    const nlohmann::json j = runs.size() == 1 ? runs[0] : nlohmann::json{{"runs", runs}};
    absl::Status st = WriteFile(o.results, j.dump(2) + "\n");
    if (!st.ok())
      std::fprintf(stderr, "gradsync: %s\n", st.ToString().c_str());
    else
      std::printf("results written to %s\n", o.results.c_str());
    if (!st.ok()) rc = 1;
  }
  if (!o.tune.empty()) {
    const std::string table = TuningLines(o.workers, all_rows);
    absl::Status st = WriteFile(o.tune, table);
    if (!st.ok())
      std::fprintf(stderr, "gradsync: %s\n", st.ToString().c_str());
    else
      std::printf("tuning table written to %s:\n%s", o.tune.c_str(), table.c_str());
    if (!st.ok()) rc = 1;
  }
  return rc;
}

// `local bench`: a server, the PS shards pushpull needs and o.workers
// workers on loopback for the duration of the bench.
int LocalBench(const BenchCommandOptions& o, const CommandHooks& hooks) {
  if (o.workers < 1 || o.workers > 64) {
    std::fprintf(stderr,
                 "gradsync: --workers must be between 1 and 64 for a local cluster\n");
    return 2;
  }
  LocalClusterOptions c;
  c.workers = o.workers;
  c.ps_shards = o.op == v1::BENCH_OP_PUSHPULL ? std::max(1, o.ps_shards) : 1;
  c.bin_dir = SelfDir();
  c.log_dir = o.log_dir;
  if (!c.log_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(c.log_dir, ec);
    if (ec) {
      std::fprintf(stderr, "gradsync: cannot create --log_dir %s: %s\n",
                   c.log_dir.c_str(), ec.message().c_str());
      return 1;
    }
  } else {
    char tmpl[] = "/tmp/gradsync-local-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      std::fprintf(stderr, "gradsync: cannot create a log directory in /tmp\n");
      return 1;
    }
    c.log_dir = tmpl;
  }
  c.log_level = o.log_level;
  c.tuning_file = o.tuning_file;
  c.heartbeat_timeout = o.heartbeat_timeout;
  c.ps_inline_bytes = o.ps_inline_bytes;
  c.interrupted = hooks.interrupted;
  if (!o.quiet) {
    std::printf("starting 1 server, %d PS shard(s), %d workers (logs in %s)\n",
                c.ps_shards, c.workers, c.log_dir.c_str());
    std::fflush(stdout);
  }
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(c);
  if (!cluster.ok()) {
    std::fprintf(stderr, "gradsync: %s\n",
                 std::string(cluster.status().message()).c_str());
    return 1;
  }
  SetClusterSecurity((*cluster)->client_security());  // its random token
  const int rc = BenchAgainst((*cluster)->coordinator(), o, hooks);
  (*cluster)->Shutdown();
  return rc;
}

}  // namespace

int RunBenchCommand(const BenchCommandOptions& options, const CommandHooks& hooks) {
  return options.local ? LocalBench(options, hooks)
                       : BenchAgainst(options.server, options, hooks);
}

}  // namespace gradsync
