// gradsync: submit, watch and compare training jobs; run a local cluster.
// This file defines the CLI's shared flags (so --help lists them under
// client/main.cc), reads them into CliOptions once, handles Ctrl-C and
// dispatches to the commands (client/cli.h, client/bench_command.h).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/str_cat.h"
#include "client/bench_command.h"
#include "client/cli.h"
#include "common/command_line.h"
#include "common/grpc/security.h"
#include "common/grpc/security_flags.h"
#include "common/grpc/transport_flags.h"
#include "common/spec/job_spec.h"
#include "common/spec/tuning_table.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051",
          "submit/watch/status/list/cancel: HOST:PORT of the coordinator.");
ABSL_FLAG(std::string, strategy, "allreduce",
          "Gradient synchronisation: ps (parameter server) or allreduce (among "
          "the workers, by --algorithm; 'ring', its old name, is the same).");
ABSL_FLAG(std::string, mode, "sync",
          "sync (BSP / synchronous allreduce) or async (ASGD/SSP for ps, "
          "bounded-staleness pipelining for allreduce).");
ABSL_FLAG(int, staleness, -1,
          "Async staleness bound. ps: SSP bound s (a worker may run at most s "
          "steps ahead of the slowest; -1 = unbounded). ring: allreduces in "
          "flight behind compute (-1 = default 1).");
ABSL_FLAG(int, workers, 4, "Number of workers (world size).");
ABSL_FLAG(int, ps_shards, 1,
          "Parameter-server shards for ps jobs (and pushpull benches): every "
          "gradient bucket is cut into partitions of at most "
          "--ps_partition_bytes, partition p on shard p % S. `local` starts "
          "the extra shard servers.");
ABSL_FLAG(int64_t, ps_partition_bytes, 0,
          "PS jobs and pushpull benches: cut every gradient bucket into "
          "partitions of at most this many bytes, partition p on shard p % S "
          "(65536..4194304). 0 = picked from the model's size: 64 KiB, "
          "doubled up to 1 MiB while a shard would hold over 64 partitions, "
          "and further where a shard could not let every worker's pulls wait "
          "(results name the size). Workers push a window of 2S+2 partitions "
          "at a time, so a shard answers early ones while later ones still "
          "arrive; with one partition the pull waits for every push. Emulated "
          "100 Mbit/s and 1 Gbit/s links, 4 workers, one shard: see "
          "docs/lab-notes/ps-partitions.md.");
ABSL_FLAG(int, epochs, 1, "Epochs over the training set.");
ABSL_FLAG(int64_t, steps, 0, "Train this many steps instead (overrides --epochs).");
ABSL_FLAG(int, batch_size, 32, "Batch size per worker (global batch = workers x this).");
ABSL_FLAG(double, lr, 0.001,
          "Learning rate (default suits adam; for sgd with momentum try 0.01).");
ABSL_FLAG(double, momentum, 0.9, "SGD momentum (0 = plain SGD).");
ABSL_FLAG(std::string, optimizer, "adam",
          "adam, or sgd (with --momentum). Adam is the default because it stays "
          "stable under the stale gradients of the async modes.");
ABSL_FLAG(std::string, model, "mlp:784-256-128-10",
          "Model: mlp:IN-H1-...-OUT (input 784 and output 10 for Fashion-MNIST), or "
          "torchscript:PATH, a module saved by torch.jit.save that the client uploads "
          "with the job (examples/models/; contract in docs/user-guide.md \"Your own "
          "model\").");
ABSL_FLAG(uint64_t, seed, 1, "Seed for initial parameters and data order.");
ABSL_FLAG(std::string, data, "fashion-mnist",
          "Data set: fashion-mnist (on each worker, --data_dir), or tensors:PATH, a "
          "file written by torch.save({\"x\": X, \"y\": Y}, PATH) (optionally with "
          "\"x_test\", \"y_test\") that the client uploads with the job; trains a "
          "--model=torchscript:PATH (docs/user-guide.md \"Your own data\"). For "
          "files too big to send, tensors-on-workers:PATH reads the same absolute "
          "PATH on every worker; the client hashes its own copy (or give "
          "tensors-on-workers:sha256:HEX:PATH) and a worker whose file differs "
          "fails the job naming it.");
ABSL_FLAG(std::string, data_dir, "",
          "Fashion-MNIST directory with the *-idx*-ubyte.gz files (default: "
          "/usr/share/datasets/fashion-mnist).");
ABSL_FLAG(std::string, tls_dir, "",
          "local: run the cluster with mutual TLS, using DIR/ca.pem, cert.pem "
          "and key.pem as `bash deploy/make-dev-certs.sh DIR` writes them. "
          "(Other commands dial with --tls_cert/--tls_key/--tls_ca.)");
ABSL_FLAG(std::string, device, "cpu", "Worker compute device: cpu or cuda.");
ABSL_FLAG(bool, tf32, false,
          "device=cuda: allow TF32 tensor-core GEMMs (faster, ~1e-3 error).");
ABSL_FLAG(int64_t, bucket_bytes, 25 << 20,
          "device=cuda: gradient bucket size; buckets (last layers first) are "
          "synchronised while backward still runs.");
ABSL_FLAG(int64_t, chunk_bytes, 1 << 20, "Ring pipelining segment size in bytes.");
ABSL_FLAG(int, connections_per_peer, 1,
          "Ring: TCP connections to each neighbour, segments striped over "
          "them (1..8; more helps where one connection's transport work "
          "saturates a core).");
ABSL_FLAG(int64_t, peer_bulk_bytes, 0,
          "Allreduce strategy and benches: collectives over at least this many "
          "bytes travel, between ranks on the same host, on the workers' "
          "bulk connections, whose receivers "
          "keep gRPC's initial flow-control windows instead of growing them "
          "by bandwidth-delay probing, so a sender waits for its receiver "
          "rather than filling its memory (docs/architecture.md). "
          "0 = the default, 4 MiB; -1 = never.");
ABSL_FLAG(std::string, wire_dtype, "fp32",
          "Element format of gradients and parameters on the wire, both "
          "strategies: fp32, bf16 or fp16 (16-bit halves the bytes; values "
          "are rounded to nearest even when sent, sums and optimizer state "
          "stay float32; see docs/user-guide.md for the accuracy cost).");
ABSL_FLAG(std::string, slow_ranks, "",
          "Experiments: RANK:FACTOR[,RANK:FACTOR...] makes those ranks' forward "
          "and backward take FACTOR (1 to 100) times as long, a straggler on "
          "demand; the job's events name a rank that stays 1.5x behind the "
          "others' median (docs/user-guide.md \"Stragglers, named\").");
ABSL_FLAG(std::string, weight_prediction, "auto",
          "Ring async: compute each step's gradient on the parameters "
          "extrapolated over the steps still in flight from the last update "
          "(w + staleness x last update), and apply the averaged gradient to "
          "the plain parameters. It recovers most of the accuracy that stale "
          "gradients cost (docs/user-guide.md). auto = on for allreduce async on "
          "the CPU, off otherwise; on; off = plain delayed gradients.");
ABSL_FLAG(std::string, tuning_file, "",
          "The allreduce tuning table for --algorithm=auto (lines 'WORLD "
          "MAX_BYTES ALGORITHM', as written by 'gradsync bench --tune=FILE'). "
          "submit, local: sent with the job, so every worker chooses by it; "
          "local, local bench: also the workers' own table. Default: the "
          "workers' table (their --tuning_file, else the built-in one), or "
          "with local's --autotune one measured at the start.");
ABSL_FLAG(bool, autotune, true,
          "local: before allreduce jobs with --algorithm=auto on 2 or more workers "
          "and no --tuning_file, run the job for 60 steps (allreduce-sync; "
          "fewer, down to 10, for models over 1 M parameters) with "
          "each of ring, halving-doubling and tree allreduce, twice, and send "
          "'WORKERS inf BEST' with the allreduce jobs (JobSpec.tuning_table), BEST "
          "being the one with the least communication per step (a few "
          "seconds). The built-in table assumes a 10 Gbit network; on one "
          "machine, where CPU time rather than links decides, other "
          "algorithms win. false: the workers' table.");
ABSL_FLAG(std::string, algorithm, "auto",
          "Allreduce strategy: algorithm per gradient bucket: ring, hd "
          "(halving-doubling), rd (recursive doubling; 'tree' is its old name), "
          "hier (reduce in "
          "host groups, ring among group leaders, broadcast), or auto (the "
          "workers' tuning table chooses by world size and bucket bytes).");
ABSL_FLAG(std::string, groups, "",
          "--algorithm=hier: a host group id per rank, comma-separated (e.g. "
          "0,0,1,1), to try groups on one machine. Default: ranks whose peer "
          "addresses share a host form a group. bench: besides ranks 0 and "
          "1's link, a second pair measures the other kind (between groups "
          "or inside one), and the model uses both links and the groups.");
ABSL_FLAG(int, step_timeout_ms, 30000,
          "Per-step communication timeout; a peer silent this long fails the job.");
ABSL_FLAG(int, stall_report_ms, 0,
          "A worker waiting this long for a peer or PS shard reports a stall "
          "(shown by status and watch); 0 = half of --step_timeout_ms.");
ABSL_FLAG(int64_t, train_limit, 0, "Use only the first N training samples (0 = all).");
ABSL_FLAG(std::string, name, "", "Free-text job name.");
ABSL_FLAG(int64_t, checkpoint_every, 0,
          "Checkpoint every K steps under the PS shards' --state_dir "
          "(ps sync: each slice after every K-th step; ps async: each slice "
          "when its slowest rank reaches a multiple of K; allreduce sync: rank 0 "
          "sends parameters + optimizer state to shard 0; 0 = off).");
ABSL_FLAG(bool, elastic, false,
          "Elastic job: when a rank is lost (worker gone, heartbeat missed, peer "
          "broken, stalled past --step_timeout_ms) the job re-forms as a new "
          "generation on the survivors plus idle workers (--workers at most, "
          "--min_workers at least) from its newest checkpoint (--checkpoint_every; "
          "50 when 0), and takes idle workers back in at a checkpoint. "
          "Training jobs on the CPU, every strategy and mode.");
ABSL_FLAG(int, min_workers, 0,
          "Elastic jobs: the fewest ranks a generation may run on (0 = 1).");
ABSL_FLAG(int, elastic_wait_ms, 0,
          "Elastic jobs: how long a re-formation waits for --min_workers idle "
          "workers before the job fails (0 = 60000).");
ABSL_FLAG(std::string, resume, "",
          "submit: start a new job from the last checkpoint of this ended job "
          "(same spec; the other job flags are ignored).");
ABSL_FLAG(std::string, results, "",
          "Write the results JSON here (one job; with --compare {\"jobs\": [...]}).");
ABSL_FLAG(bool, trace, false,
          "Record a timeline of every rank (Chrome trace JSON, for Perfetto / "
          "chrome://tracing); with --wait / local it is written to --trace_file.");
ABSL_FLAG(std::string, trace_file, "",
          "--trace: the merged trace's path (default trace-<job id>.json; with "
          "several jobs, -<job id> is inserted before .json).");
ABSL_FLAG(bool, compare, false,
          "local: run the same job under each of --pairs and print a table.");
ABSL_FLAG(std::string, pairs, "ps-sync,ps-async,allreduce-sync,allreduce-async",
          "--compare: comma-separated strategy-mode pairs to run.");
ABSL_FLAG(bool, compare_warmup, true,
          "--compare: first run a one-step job (the first pair's, not in the "
          "table), so that every worker has loaded the dataset before the "
          "first compared job starts; otherwise that job's wall time also "
          "holds the load (about 1 s here).");
ABSL_FLAG(std::string, log_dir, "",
          "local: directory for the daemons' logs (default: a new /tmp/gradsync-local-* "
          "directory, printed at start).");
ABSL_FLAG(std::string, log_level, "warn", "local: daemons' log level.");
ABSL_FLAG(double, slow_worker, 1.0,
          "local: make the last worker a straggler whose forward/backward takes "
          "this many times as long (its --compute_slowdown; 1 = none, at most "
          "100), to see what each strategy and mode does with a slow rank.");
ABSL_FLAG(std::vector<std::string>, worker_flags, {},
          "local: further flags for every worker, comma-separated, each as "
          "gradsync-worker takes it (e.g. --worker_flags=--max_job_memory=-1,"
          "--cpu_threads=1); a flag that a worker refuses stops `local` at "
          "start naming it.");
ABSL_FLAG(std::string, dashboard, "",
          "local: serve the coordinator's live dashboard on HOST:PORT (e.g. "
          "127.0.0.1:8080; port 0 picks a free one) while the jobs run, and print "
          "its address with the cluster's token (docs/operations.md, Dashboard). "
          "Default: off.");
ABSL_FLAG(bool, wait, false, "submit: watch the job until it ends.");
ABSL_FLAG(bool, json, false, "status/list: print JSON instead of text.");
ABSL_FLAG(bool, quiet, false, "Print no progress lines, only results.");
ABSL_FLAG(double, heartbeat_timeout, 6.0,
          "local: seconds without a heartbeat before a worker counts as dead.");
ABSL_FLAG(int64_t, ps_inline_bytes, -1,
          "local: every PS shard's --ps_inline_bytes (pushes of at most this "
          "many float32 bytes are summed on the gRPC thread that read them; "
          "0: all on the shards' reduce threads; at most 1048576; "
          "docs/lab-notes/ps-small-pushes.md). -1: the shards' default, 64 KiB.");

namespace gradsync {
namespace {

constexpr char kUsage[] = R"(gradsync COMMAND [flags]

Commands:
  local     start a server and --workers workers on loopback, run one job
            (or, with --compare, the job under several strategies), print
            results, shut everything down. Ctrl-C cancels and cleans up.
  submit    submit a job to --server; prints its id (--wait to watch it)
  bench     submit a bench job to --server: --op (allreduce, broadcast,
            pushpull) timed over --sizes on --workers workers, --iters timed
            runs after --warmup, every result verified; prints one row per
            size (time, algbw, busbw, the alpha-beta model, OK/FAILED);
            --results=FILE.json, --tune=FILE (ring/hd/rd --tune_passes
            times each, the lowest mean per size)
  local bench   the same on a loopback cluster of its own
  watch ID  stream a job's progress until it ends
  status ID show one job
  list      show jobs and workers
  cancel ID cancel a queued or running job

Flags may be written --batch-size or --batch_size.
Every command that dials sends the cluster token from --token_file=PATH (or
$GRADSYNC_TOKEN; the file wins), with TLS when --tls_cert/--tls_key/--tls_ca
are given; `local` makes a random token of its own (see docs/operations.md, Security).
Examples:
  gradsync local --compare --workers 4 --epochs 1 --results=results.json
  gradsync submit --server=HOST:PORT --strategy=ps --mode=async --staleness=2 --wait
  gradsync submit --server=HOST:PORT --resume=j-1-7 --wait
)";

// The job spec the job flags describe (CliOptions::spec).
v1::JobSpec SpecFromFlags() {
  v1::JobSpec s;
  s.set_name(absl::GetFlag(FLAGS_name));
  s.set_strategy(EnumFlag(ParseStrategy(absl::GetFlag(FLAGS_strategy))));
  s.set_mode(EnumFlag(ParseSyncMode(absl::GetFlag(FLAGS_mode))));
  if (absl::GetFlag(FLAGS_staleness) >= 0)
    s.set_staleness(absl::GetFlag(FLAGS_staleness));
  else if (absl::GetFlag(FLAGS_staleness) < -1)
    s.set_staleness(absl::GetFlag(FLAGS_staleness));
  s.set_workers(absl::GetFlag(FLAGS_workers));
  s.set_ps_shards(absl::GetFlag(FLAGS_ps_shards));
  s.set_ps_partition_bytes(absl::GetFlag(FLAGS_ps_partition_bytes));
  s.set_epochs(absl::GetFlag(FLAGS_epochs));
  s.set_steps(absl::GetFlag(FLAGS_steps));
  s.set_batch_size(absl::GetFlag(FLAGS_batch_size));
  s.set_lr(static_cast<float>(absl::GetFlag(FLAGS_lr)));
  s.set_momentum(static_cast<float>(absl::GetFlag(FLAGS_momentum)));
  s.set_optimizer(EnumFlag(ParseOptimizer(absl::GetFlag(FLAGS_optimizer))));
  s.set_model(absl::GetFlag(FLAGS_model));
  s.set_dataset(absl::GetFlag(FLAGS_data));
  s.set_seed(absl::GetFlag(FLAGS_seed));
  s.set_data_dir(absl::GetFlag(FLAGS_data_dir));
  s.set_device(EnumFlag(ParseDevice(absl::GetFlag(FLAGS_device))));
  s.set_chunk_bytes(absl::GetFlag(FLAGS_chunk_bytes));
  s.set_connections_per_peer(absl::GetFlag(FLAGS_connections_per_peer));
  s.set_peer_bulk_bytes(absl::GetFlag(FLAGS_peer_bulk_bytes));
  s.set_algorithm(EnumFlag(ParseAlgorithm(absl::GetFlag(FLAGS_algorithm))));
  if (const std::string note = OldAlgorithmSpellingNote(absl::GetFlag(FLAGS_algorithm));
      !note.empty()) {
    std::cerr << note << std::endl;
  }
  s.set_groups(absl::GetFlag(FLAGS_groups));
  s.set_wire_dtype(EnumFlag(ParseWireDtype(absl::GetFlag(FLAGS_wire_dtype))));
  s.set_weight_prediction(
      EnumFlag(ParseWeightPrediction(absl::GetFlag(FLAGS_weight_prediction))));
  s.set_bucket_bytes(absl::GetFlag(FLAGS_bucket_bytes));
  s.set_tf32(absl::GetFlag(FLAGS_tf32));
  s.set_step_timeout_ms(absl::GetFlag(FLAGS_step_timeout_ms));
  s.set_stall_report_ms(absl::GetFlag(FLAGS_stall_report_ms));
  s.set_train_limit(absl::GetFlag(FLAGS_train_limit));
  s.set_checkpoint_every(absl::GetFlag(FLAGS_checkpoint_every));
  s.set_elastic(absl::GetFlag(FLAGS_elastic));
  s.set_min_workers(absl::GetFlag(FLAGS_min_workers));
  s.set_elastic_wait_ms(absl::GetFlag(FLAGS_elastic_wait_ms));
  s.set_trace(absl::GetFlag(FLAGS_trace));
  absl::StatusOr<std::vector<v1::RankSlowdown>> slow =
      ParseSlowRanks(absl::GetFlag(FLAGS_slow_ranks));
  if (!slow.ok()) Die(absl::StrCat("--", slow.status().message()), 2);
  for (const v1::RankSlowdown& r : *slow) *s.add_slow_ranks() = r;
  if (const std::string path = absl::GetFlag(FLAGS_tuning_file); !path.empty()) {
    absl::StatusOr<TuningTable> table = TuningTable::Load(path);
    if (!table.ok()) {
      Die(absl::StrCat("--tuning_file: ", table.status().message()), 2);
    }
    s.set_tuning_table(table->ToString());
  }
  return s;
}

CliOptions CliOptionsFromFlags() {
  CliOptions o;
  o.server = absl::GetFlag(FLAGS_server);
  o.wait = absl::GetFlag(FLAGS_wait);
  o.resume = absl::GetFlag(FLAGS_resume);
  o.json = absl::GetFlag(FLAGS_json);
  o.quiet = absl::GetFlag(FLAGS_quiet);
  o.results = absl::GetFlag(FLAGS_results);
  o.trace = absl::GetFlag(FLAGS_trace);
  o.trace_file = absl::GetFlag(FLAGS_trace_file);
  o.compare = absl::GetFlag(FLAGS_compare);
  o.pairs = absl::GetFlag(FLAGS_pairs);
  o.compare_warmup = absl::GetFlag(FLAGS_compare_warmup);
  o.autotune = absl::GetFlag(FLAGS_autotune);
  o.strategy = absl::GetFlag(FLAGS_strategy);
  o.mode = absl::GetFlag(FLAGS_mode);
  o.workers = absl::GetFlag(FLAGS_workers);
  o.ps_shards = absl::GetFlag(FLAGS_ps_shards);
  o.log_dir = absl::GetFlag(FLAGS_log_dir);
  o.dashboard = absl::GetFlag(FLAGS_dashboard);
  o.slow_worker = absl::GetFlag(FLAGS_slow_worker);
  o.worker_flags = absl::GetFlag(FLAGS_worker_flags);
  o.data_dir = absl::GetFlag(FLAGS_data_dir);
  o.tuning_file = absl::GetFlag(FLAGS_tuning_file);
  o.log_level = absl::GetFlag(FLAGS_log_level);
  o.heartbeat_timeout = absl::GetFlag(FLAGS_heartbeat_timeout);
  o.ps_inline_bytes = absl::GetFlag(FLAGS_ps_inline_bytes);
  o.tls_dir = absl::GetFlag(FLAGS_tls_dir);
  o.spec = SpecFromFlags;
  return o;
}

std::string NeedId(const std::vector<char*>& args, const char* cmd) {
  if (args.size() < 3)
    Die(absl::StrCat(cmd, ": missing job id (gradsync ", cmd, " ID)"), 2);
  return args[2];
}

bool IsBench(const std::vector<char*>& args) {
  const std::string cmd = args[1];
  return cmd == "bench" ||
         (cmd == "local" && args.size() >= 3 && std::string(args[2]) == "bench");
}

int Bench(bool local, Interruption* interruption) {
  absl::StatusOr<BenchCommandOptions> bench = BenchOptionsFromFlags(local);
  if (!bench.ok()) Die(std::string(bench.status().message()), 2);
  CommandHooks hooks;
  hooks.interrupted = interruption->flag();
  hooks.set_watch_context = [interruption](grpc::ClientContext* ctx) {
    interruption->SetWatched(ctx);
  };
  return RunBenchCommand(*bench, hooks);
}

// Dies (2) when an output file flag names a place that cannot be written:
// a directory that does not exist or is not writable, or a directory itself,
// so that a job is not run only for its results to be lost at the end.
void CheckOutputPath(const char* flag, const std::string& path) {
  if (path.empty()) return;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    Die(absl::StrCat(flag, "=", path, " is a directory; name a file"), 2);
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  if (!std::filesystem::is_directory(dir, ec)) {
    Die(absl::StrCat(flag, "=", path, ": directory ", dir, " does not exist"), 2);
  }
  if (access(dir.c_str(), W_OK) != 0) {
    Die(absl::StrCat(flag, "=", path, ": directory ", dir, " is not writable"), 2);
  }
}

int Run(const std::vector<char*>& args, Interruption* interruption) {
  const std::string cmd = args[1];
  CheckOutputPath("--results", absl::GetFlag(FLAGS_results));
  CheckOutputPath("--trace_file", absl::GetFlag(FLAGS_trace_file));
  // The cluster token (--token_file, else $GRADSYNC_TOKEN) and TLS for every
  // command that dials; `local` replaces it with its own cluster's.
  absl::StatusOr<ClusterSecurity> security =
      SecurityFromCommandLine(SecurityRole::kClient);
  if (!security.ok()) Die(std::string(security.status().message()), 2);
  SetClusterSecurity(*std::move(security));
  ApplyTransportFlags();
  if (IsBench(args)) return Bench(cmd == "local", interruption);
  const CliOptions o = CliOptionsFromFlags();
  if (cmd == "local") return LocalCommand(o, interruption);
  if (cmd == "submit") return SubmitCommand(o, interruption);
  if (cmd == "watch") return WatchCommand(o, NeedId(args, "watch"), interruption);
  if (cmd == "status" || cmd == "cancel") {
    return StatusOrCancelCommand(o, cmd, NeedId(args, cmd.c_str()));
  }
  if (cmd == "list") return ListCommand(o);
  Die(absl::StrCat("unknown command '", cmd, "'; run gradsync --help"), 2);
}

}  // namespace
}  // namespace gradsync

int main(int argc, char** argv) {
  // Accept --batch-size as well as --batch_size (as the daemons do).
  gradsync::CommandLine command_line(argc, argv);
  absl::SetProgramUsageMessage(gradsync::kUsage);
  absl::FlagsUsageConfig cfg;
  cfg.contains_help_flags = [](absl::string_view f) {
    return f.find("client/main.cc") != absl::string_view::npos ||
           f.find("grpc/security_flags.cc") != absl::string_view::npos ||
           f.find("grpc/transport_flags.cc") != absl::string_view::npos ||
           f.find("client/bench_flags.cc") != absl::string_view::npos;
  };
  absl::SetFlagsUsageConfig(cfg);
  std::vector<char*> args =
      absl::ParseCommandLine(command_line.argc(), command_line.argv());
  if (args.size() < 2) {
    std::cerr << gradsync::kUsage;
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  // Ctrl-C / SIGTERM: stop watching; the command cancels its job and cleans up.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // The first signal cancels the job and cleans up; a second one exits at
  // once (the daemons of `local` die with us through PR_SET_PDEATHSIG).
  // (Never destroyed: the detached thread may use it until exit.)
  static auto* interruption = new gradsync::Interruption();
  std::thread([set]() mutable {
    int sig;
    sigwait(&set, &sig);
    interruption->Interrupt();
    sigwait(&set, &sig);
    std::fprintf(stderr, "gradsync: interrupted again; exiting\n");
    _exit(130);
  }).detach();
  return gradsync::Run(args, interruption);
}
