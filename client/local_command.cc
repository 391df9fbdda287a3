// `gradsync local`: a server, PS shards and workers as processes on
// loopback (LocalCluster), one job or, with --compare, the job under each
// strategy-mode pair, then the results; everything is shut down at the end.
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/bench_command.h"
#include "client/cli.h"
#include "client/local_cluster.h"
#include "client/report.h"
#include "common/grpc/security.h"
#include "common/spec/job_spec.h"
#include "common/spec/model_spec.h"

namespace gradsync {
namespace {

using Pairs = std::vector<std::pair<v1::Strategy, v1::SyncMode>>;

// --autotune's benches: few iterations, since the whole run takes seconds.
constexpr int kAutotuneIters = 40;
constexpr int kAutotuneWarmup = 5;

// --compare: the --pairs list; else the one --strategy/--mode pair. Dies (2)
// naming the flag that does not parse.
Pairs PairsFromOptions(const CliOptions& o) {
  Pairs pairs;
  if (!o.compare) {
    pairs.emplace_back(EnumFlag(ParseStrategy(o.strategy)),
                       EnumFlag(ParseSyncMode(o.mode)));
    return pairs;
  }
  for (absl::string_view p : absl::StrSplit(o.pairs, ',', absl::SkipEmpty())) {
    std::vector<std::string> sm = absl::StrSplit(p, '-');
    absl::StatusOr<v1::Strategy> strategy =
        sm.size() == 2 ? ParseStrategy(sm[0]) : absl::InvalidArgumentError("");
    absl::StatusOr<v1::SyncMode> mode =
        sm.size() == 2 ? ParseSyncMode(sm[1]) : absl::InvalidArgumentError("");
    if (!strategy.ok() || !mode.ok()) {
      Die(absl::StrCat("--pairs: '", p, "' is not STRATEGY-MODE (e.g. ring-async)"), 2);
    }
    pairs.emplace_back(*strategy, *mode);
  }
  if (pairs.empty()) Die("--pairs is empty", 2);
  return pairs;
}

std::string MakeLogDir(const std::string& dir) {
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) Die(absl::StrCat("cannot create --log_dir ", dir, ": ", ec.message()));
    return dir;
  }
  char tmpl[] = "/tmp/gradsync-local-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) Die("cannot create a log directory in /tmp");
  return tmpl;
}

// The cluster's settings; validates the locally-checkable flags before any
// process starts, and makes the log directory.
LocalClusterOptions ClusterOptions(const CliOptions& cli,
                                   const Interruption& interruption) {
  if (cli.workers < 1 || cli.workers > 64) {
    Die("--workers must be between 1 and 64 for a local cluster", 2);
  }
  if (cli.ps_shards < 1 || cli.ps_shards > 16) {
    Die("--ps_shards must be between 1 and 16 for a local cluster", 2);
  }
  LocalClusterOptions o;
  o.workers = cli.workers;
  o.ps_shards = cli.ps_shards;
  o.bin_dir = SelfDir();
  o.log_dir = MakeLogDir(cli.log_dir);
  o.data_dir = cli.data_dir;
  o.tuning_file = cli.tuning_file;
  o.log_level = cli.log_level;
  o.heartbeat_timeout = cli.heartbeat_timeout;
  o.interrupted = interruption.flag();
  o.tls_dir = cli.tls_dir;
  return o;
}

// Workers load a dataset on their first job and keep it (WorkerDaemon::
// LoadData), so without this the first compared job alone would pay for the
// load in its wall time. One step of the first pair, without checkpoints,
// resume or trace; 1 when it does not succeed (the comparison still runs).
int WarmUp(v1::Coordinator::Stub* stub, const CliOptions& cli,
           const std::pair<v1::Strategy, v1::SyncMode>& pair,
           Interruption* interruption) {
  v1::JobSpec spec = cli.spec();
  spec.set_name("warm-up");
  spec.set_strategy(pair.first);
  spec.set_mode(pair.second);
  spec.set_steps(1);
  spec.set_checkpoint_every(0);
  spec.clear_resume_from();
  spec.set_trace(false);
  std::printf("warm-up: a one-step job loads the dataset into every worker "
              "(not in the table; --compare_warmup=false skips it)\n");
  std::fflush(stdout);
  v1::Job job;
  if (SubmitAndWatch(stub, spec, true, cli, interruption, &job) != 0) {
    if (!interruption->interrupted()) {
      std::printf("warm-up job %s did not succeed; comparing anyway\n",
                  job.id().c_str());
    }
    return 1;
  }
  return 0;
}

// "4 KiB", "1 MiB" (whole units), else bytes.
std::string HumanBytes(int64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) {
    return absl::StrCat(bytes >> 20, " MiB");
  }
  if (bytes >= 1024 && bytes % 1024 == 0) return absl::StrCat(bytes >> 10, " KiB");
  return absl::StrCat(bytes, " B");
}

// --autotune: whether any of `pairs` runs a ring job that lets the table
// choose, on 2 or more workers, with no table of its own (--tuning_file).
bool WantsAutotune(const CliOptions& cli, const v1::JobSpec& spec,
                   const Pairs& pairs) {
  if (!cli.autotune || spec.workers() < 2 || !spec.tuning_table().empty()) {
    return false;
  }
  if (spec.algorithm() != v1::ALGORITHM_AUTO &&
      spec.algorithm() != v1::ALGORITHM_UNSPECIFIED) {
    return false;
  }
  for (const auto& [strategy, mode] : pairs) {
    if (strategy == v1::STRATEGY_RING) return true;
  }
  return false;
}

// Times ring, hd and tree on the cluster over AutotuneSizes(the model's
// gradient) with the job's transport settings and returns the tuning table;
// "" when that fails (the jobs then use the workers' table; a line says
// why).
std::string Autotune(v1::Coordinator::Stub* stub, const v1::JobSpec& spec,
                     Interruption* interruption) {
  absl::StatusOr<MlpSpec> model =
      ParseModelSpec(spec.model().empty() ? kDefaultModel : spec.model());
  if (!model.ok()) return "";  // the job's submit names the problem
  BenchCommandOptions o;
  o.workers = spec.workers();
  o.op = v1::BENCH_OP_ALLREDUCE;
  o.sizes = AutotuneSizes(static_cast<int64_t>(NumParams(*model) * sizeof(float)));
  o.iters = kAutotuneIters;
  o.warmup = kAutotuneWarmup;
  o.chunk_bytes = spec.chunk_bytes();
  o.step_timeout_ms = spec.step_timeout_ms();
  o.connections_per_peer = spec.connections_per_peer();
  o.peer_bulk_bytes = spec.peer_bulk_bytes();
  o.wire_dtype = spec.wire_dtype();
  o.groups = spec.groups();
  o.quiet = true;
  std::printf("autotune: timing ring, hd and tree allreduce of %s to %s on %d "
              "workers (--autotune=false skips it)\n",
              HumanBytes(o.sizes.front()).c_str(),
              HumanBytes(o.sizes.back()).c_str(), o.workers);
  std::fflush(stdout);
  CommandHooks hooks;
  hooks.interrupted = interruption->flag();
  hooks.set_watch_context = [interruption](grpc::ClientContext* ctx) {
    interruption->SetWatched(ctx);
  };
  const absl::Time began = absl::Now();
  absl::StatusOr<std::string> table = TuneAllreduce(stub, o, hooks);
  if (!table.ok()) {
    if (!interruption->interrupted()) {
      std::printf("autotune failed (%s); ring jobs use the workers' table\n",
                  std::string(table.status().message()).c_str());
    }
    return "";
  }
  std::printf("autotune: %.1f s; ring jobs with --algorithm=auto choose by:\n",
              absl::ToDoubleSeconds(absl::Now() - began));
  for (absl::string_view line : absl::StrSplit(*table, '\n', absl::SkipEmpty())) {
    if (!absl::StartsWith(line, "#")) std::printf("  %s\n", std::string(line).c_str());
  }
  std::fflush(stdout);
  return *std::move(table);
}

}  // namespace

int LocalCommand(const CliOptions& cli, Interruption* interruption) {
  const Pairs pairs = PairsFromOptions(cli);
  const LocalClusterOptions o = ClusterOptions(cli, *interruption);
  std::printf("starting 1 server, %d PS shard(s), %d workers (logs in %s)\n",
              o.ps_shards, o.workers, o.log_dir.c_str());
  std::fflush(stdout);
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(o);
  if (!cluster.ok()) {
    Die(std::string(cluster.status().message()),
        interruption->interrupted() ? 130 : 1);
  }
  SetClusterSecurity((*cluster)->client_security());  // its random token
  auto stub = Connect((*cluster)->coordinator());
  std::vector<v1::Job> jobs;
  std::vector<JobTimeline> timelines;
  int rc = 0;
  if (cli.compare && cli.compare_warmup && !interruption->interrupted()) {
    rc = WarmUp(stub.get(), cli, pairs.front(), interruption);
  }
  std::string tuned;
  if (const v1::JobSpec spec = cli.spec();
      WantsAutotune(cli, spec, pairs) && !interruption->interrupted()) {
    tuned = Autotune(stub.get(), spec, interruption);
  }
  for (const auto& [strategy, mode] : pairs) {
    if (interruption->interrupted()) break;
    v1::JobSpec spec = cli.spec();
    spec.set_strategy(strategy);
    spec.set_mode(mode);
    if (strategy == v1::STRATEGY_RING && !tuned.empty()) {
      spec.set_tuning_table(tuned);
    }
    v1::Job job;
    JobTimeline timeline;
    if (SubmitAndWatch(stub.get(), spec, true, cli, interruption, &job,
                       &timeline) != 0) {
      rc = 1;
    }
    jobs.push_back(job);
    timelines.push_back(std::move(timeline));
    if (!cli.compare) PrintJob(job);
  }
  (*cluster)->Shutdown();
  if (interruption->interrupted()) return 130;
  if (cli.compare) std::printf("\n%s", CompareTable(jobs).c_str());
  WriteResults(cli, jobs, cli.compare, &timelines);
  WriteTraces(cli, jobs);
  return rc;
}

}  // namespace gradsync
