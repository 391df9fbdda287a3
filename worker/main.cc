// gradsync-worker: a training daemon that joins a coordinator.
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/grpc/security_flags.h"
#include "common/grpc/transport_flags.h"
#include "common/logging.h"
#include "common/memory.h"
#include "common/metrics/metrics_server.h"
#include "common/process_setup.h"
#include "common/signals.h"
#include "common/spec/tuning_table.h"
#include "worker/model/device_factory.h"
#include "worker/restart.h"
#include "worker/torch_file_check.h"
#include "worker/worker_daemon.h"

ABSL_FLAG(std::string, coordinator, "127.0.0.1:50051",
          "HOST:PORT of the gradsync-server coordinator to join. The worker "
          "keeps retrying until it is reachable.");
ABSL_FLAG(std::string, listen, "0.0.0.0:0",
          "HOST:PORT for this worker's Peer service (ring traffic); port 0 "
          "picks a free port.");
ABSL_FLAG(std::string, advertise, "",
          "HOST:PORT under which other workers reach this one (default: the "
          "listen address with 0.0.0.0 replaced by 127.0.0.1). Set it in "
          "containers, e.g. --advertise=worker1:7000, or to 'auto': this "
          "host's name and the listen port (compose --scale, StatefulSets).");
ABSL_FLAG(int, bulk_port, 0,
          "Port of this worker's second Peer server, for bulk connections: "
          "collectives of at least the job's peer_bulk_bytes (client flag "
          "--peer_bulk_bytes, default 4 MiB) from ranks on the same host "
          "travel there, on connections "
          "whose receiver does not grow its HTTP/2 windows by probing "
          "(faster for large tensors, see docs/architecture.md). On the "
          "--listen host, advertised with the --advertise host. 0 picks a "
          "free port; -1 serves none, and peers send everything to --listen. "
          "A peer that cannot reach this port falls back to --listen after "
          "3 s, with a warning.");
ABSL_FLAG(std::string, id, "",
          "Worker id shown in listings and errors "
          "(default: hostname-pid).");
ABSL_FLAG(std::string, data_dir, "",
          "Fashion-MNIST directory on this machine, read by jobs that name no "
          "data_dir (default /usr/share/datasets/fashion-mnist). Always allowed.");
ABSL_FLAG(std::vector<std::string>, allowed_data_dirs, {},
          "DIR,... further directories (and everything below them) that a "
          "job's data_dir may name. A job naming any other path fails with "
          "PERMISSION_DENIED before a file is opened (paths are compared "
          "after resolving symlinks and '..').");
ABSL_FLAG(int64_t, data_cache_bytes, int64_t{2} << 30,
          "Bytes of data sets (Fashion-MNIST, tensors: files) kept in memory "
          "between jobs; the least recently used go first, and one larger than "
          "this is used by its job and not kept (default 2 GiB; 0: keep none).");
ABSL_FLAG(int64_t, max_job_memory, 0,
          "Bytes a TorchScript job's tensors may take on this worker; an "
          "allocation past it fails the job with RESOURCE_EXHAUSTED (\"out of "
          "memory ... --max_job_memory\") and the daemon stays up, where the "
          "kernel would otherwise kill the whole daemon. 0 (default): three "
          "quarters of the memory this worker may use (its cgroup's limit, as in "
          "a container, else the machine's); -1: no limit. Memory outside "
          "libtorch's tensors (the daemon's own buffers) is not counted.");
ABSL_FLAG(int, restarted_after_signal, 0,
          "Set by the worker itself when it restarts after a fatal signal (a "
          "job's model that crashed it): the signal's number, for the log. Not "
          "for users.");
ABSL_FLAG(std::string, cache_dir, "/tmp/gradsync-worker-cache",
          "Where this worker keeps the TorchScript models it fetched from the "
          "coordinator, each under its SHA-256 (a job naming a cached model does "
          "not fetch it again; a file that no longer matches its hash is fetched "
          "anew). Workers on one machine may share it.");
ABSL_FLAG(std::string, check_torch_file, "",
          "Internal: read data:PATH or model:FEATURES:CLASSES:PATH as a job would, "
          "then exit (0: it reads; 1: the error on stderr). The worker runs itself "
          "this way, under a memory limit, before it loads an uploaded file "
          "(worker/torch_file_check.h).");
ABSL_FLAG(std::string, torch_plugin, "",
          "The plugin with which this worker trains TorchScript models and reads "
          "tensors: data sets (libgradsync_torch.so; it needs libtorch). The worker "
          "opens it when a job first needs it, not at start. Default: beside this "
          "binary, then ../lib/gradsync/ from it. A worker without it (or without "
          "libtorch) runs MLP jobs and refuses the others naming what is missing.");
ABSL_FLAG(std::string, cuda_plugin, "",
          "The plugin with the CUDA backend (libgradsync_cuda.so; it needs the CUDA "
          "runtime and cuBLAS). The worker opens it at start only where an NVIDIA "
          "driver is installed (to count GPUs), else never. Default: as "
          "--torch_plugin.");
ABSL_FLAG(int, cpu_threads, 0,
          "BLAS threads of cpu jobs (0 = auto: this host's cores, less one "
          "per rank of the job on this host for its communication, shared "
          "among those ranks; ranks count as on this host when their peer "
          "addresses name the same host, so set it by hand where containers "
          "on one machine have addresses of their own).");
ABSL_FLAG(double, compute_slowdown, 1.0,
          "Experiments and tests: make this worker a straggler. Each training "
          "step's forward/backward is followed by a sleep of (F - 1) times its "
          "own duration, so the worker computes F times slower than its "
          "peers on the same host (1 = off; at most 100). Its ranks' "
          "communication is not slowed.");
ABSL_FLAG(int, gpu, -1,
          "GPU for device=cuda jobs (default -1: the job rank modulo the GPUs "
          "visible, so workers on one machine spread over its GPUs; several "
          "workers may share one GPU).");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn, error or off.");
ABSL_FLAG(std::string, metrics_listen, "",
          "HOST:PORT to serve Prometheus metrics on (GET /metrics; port 0 "
          "picks a free port, printed on stdout as 'metrics at "
          "http://HOST:PORT/metrics'). Default: off.");
ABSL_FLAG(std::string, tuning_file, "",
          "Allreduce tuning table for ring jobs with --algorithm=auto: lines "
          "'WORLD MAX_BYTES ALGORITHM' (common/spec/tuning_table.h), as "
          "`gradsync bench --tune` writes them. Default: the built-in table. "
          "A missing or malformed file stops the worker at start.");

namespace {

// The worker's settings from the flags; errors name the flag.
absl::StatusOr<gradsync::WorkerOptions> WorkerOptionsFromFlags() {
  gradsync::WorkerOptions o;
  o.coordinator = absl::GetFlag(FLAGS_coordinator);
  o.listen = absl::GetFlag(FLAGS_listen);
  o.advertise = absl::GetFlag(FLAGS_advertise);
  o.bulk_port = absl::GetFlag(FLAGS_bulk_port);
  if (o.bulk_port < -1 || o.bulk_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--bulk_port must be a port (0 = any free one) or -1, got ", o.bulk_port));
  }
  o.id = absl::GetFlag(FLAGS_id);
  o.data_dir = absl::GetFlag(FLAGS_data_dir);
  o.cache_dir = absl::GetFlag(FLAGS_cache_dir);
  o.helper_binary = "/proc/self/exe";
  o.torch_plugin = absl::GetFlag(FLAGS_torch_plugin);
  o.allowed_data_dirs = absl::GetFlag(FLAGS_allowed_data_dirs);
  o.data_cache_bytes = absl::GetFlag(FLAGS_data_cache_bytes);
  if (o.data_cache_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--data_cache_bytes must be >= 0, got ", o.data_cache_bytes));
  }
  o.max_job_memory = absl::GetFlag(FLAGS_max_job_memory);
  if (o.max_job_memory < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_job_memory must be bytes, 0 (auto) or -1 (no limit), got ",
                     o.max_job_memory));
  }
  if (o.max_job_memory == 0) {
    o.max_job_memory =
        gradsync::MemoryThisProcessMayUse(*gradsync::Env::Default()) / 4 * 3;
  }
  o.gpu = absl::GetFlag(FLAGS_gpu);
  o.cpu_threads = absl::GetFlag(FLAGS_cpu_threads);
  o.compute_slowdown = absl::GetFlag(FLAGS_compute_slowdown);
  if (!(o.compute_slowdown >= 1.0 && o.compute_slowdown <= 100.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--compute_slowdown must be from 1 (off) to 100, got ", o.compute_slowdown));
  }
  o.num_gpus = gradsync::VisibleGpuCount();
  if (o.num_gpus == 0 && gradsync::NvidiaDriverPresent()) {
    // A GPU machine whose worker offers none: say why (the plugin or its
    // libraries missing, or no visible device).
    const absl::Status cuda = gradsync::CudaAvailable();
    spdlog::warn("an NVIDIA driver is installed but this worker offers no GPU: {}",
                 cuda.ok() ? "no visible CUDA device" : std::string(cuda.message()));
  }
  if (const std::string path = absl::GetFlag(FLAGS_tuning_file); !path.empty()) {
    absl::StatusOr<gradsync::TuningTable> table = gradsync::TuningTable::Load(path);
    if (!table.ok()) {
      return absl::Status(table.status().code(),
                          absl::StrCat("--tuning_file: ", table.status().message()));
    }
    spdlog::info("allreduce tuning table {} ({} rules)", path, table->rules().size());
    o.tuning = std::make_shared<const gradsync::TuningTable>(*std::move(table));
  }
  if (o.cpu_threads < 0 || o.cpu_threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cpu_threads must be 0 (auto) to 1024, got ", o.cpu_threads));
  }
  if (o.gpu >= 0 && o.gpu >= o.num_gpus) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu=", o.gpu, " but ", o.num_gpus, " GPU(s) are visible"));
  }
  return o;
}

// What main needs settled before anything starts; every error names its
// flag (main exits 2 with it).
struct Startup {
  gradsync::ClusterSecurity security;
  gradsync::WorkerOptions options;
};

absl::StatusOr<Startup> CheckStartup() {
  if (absl::Status st = gradsync::InitLogging("worker", absl::GetFlag(FLAGS_log_level));
      !st.ok()) {
    return st;
  }
  absl::StatusOr<gradsync::ClusterSecurity> security =
      gradsync::SecurityFromCommandLine(gradsync::SecurityRole::kDaemon);
  if (!security.ok()) return security.status();
  gradsync::ApplyTransportFlags();
  absl::StatusOr<gradsync::WorkerOptions> options = WorkerOptionsFromFlags();
  if (!options.ok()) return options.status();
  return Startup{*std::move(security), *std::move(options)};
}

// --help lists this daemon's flags and the security and transport ones
// (absl's default looks for a file named after the program, and finds none).
void ListOwnFlagsInHelp() {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view f) {
    return absl::StrContains(f, "worker/main.cc") ||
           absl::StrContains(f, "grpc/security_flags.cc") ||
           absl::StrContains(f, "grpc/transport_flags.cc");
  };
  absl::SetFlagsUsageConfig(usage);
}

// Before any library loads (OpenBLAS starts threads as it does): see
// common/signals.h.
__attribute__((section(".preinit_array"), used)) void (*const kBlockSignalsAtLoad)(
    int, char**, char**) = &gradsync::BlockTerminationSignalsAtLoad;

}  // namespace

int main(int argc, char** argv) {
  gradsync::BlockTerminationSignals();
  absl::SetProgramUsageMessage(
      "gradsync-worker --coordinator=HOST:PORT [--listen=HOST:PORT] "
      "[--advertise=HOST:PORT] [--bulk_port=PORT] --token_file=PATH|--auth=none "
      "[--tls_cert=PEM --tls_key=PEM --tls_ca=PEM]\n\nJoins the coordinator, waits for "
      "jobs, trains "
      "its shard of the data and synchronises gradients by the job's strategy. "
      "Stops cleanly on SIGINT/SIGTERM. The token and TLS flags (a token "
      "file wins over GRADSYNC_TOKEN): --helpon=security_flags.");
  ListOwnFlagsInHelp();
  // --token-file as well as --token_file, as the CLI takes them.
  // A restart's command line: this one without a restart's own mark.
  std::vector<std::string> own_argv;
  for (int i = 0; i < argc; ++i) {
    if (!absl::StartsWith(argv[i], gradsync::kRestartedAfterSignalFlag)) {
      own_argv.push_back(argv[i]);
    }
  }
  gradsync::CommandLine command_line(argc, argv);
  absl::ParseCommandLine(command_line.argc(), command_line.argv());
  gradsync::SetTorchPluginPath(absl::GetFlag(FLAGS_torch_plugin));
  gradsync::SetCudaPluginPath(absl::GetFlag(FLAGS_cuda_plugin));
  if (const std::string arg = absl::GetFlag(FLAGS_check_torch_file); !arg.empty()) {
    const absl::Status st = gradsync::CheckTorchFile(arg);
    if (!st.ok()) std::cerr << st.message() << "\n";
    return st.ok() ? 0 : 1;
  }
  gradsync::PrepareDaemonProcess();  // before any thread starts
  absl::StatusOr<Startup> startup = CheckStartup();
  if (!startup.ok()) {
    std::cerr << "gradsync-worker: " << startup.status().message() << "\n";
    return 2;
  }
  // grpc.health.v1.Health on the Peer port: "" is SERVING once listening.
  grpc::EnableDefaultHealthCheckService(true);
  startup->options.restart_argv = own_argv;
  gradsync::WorkerDaemon daemon(startup->options);
  gradsync::CountAuthRefusals(daemon.mutable_metrics_registry(), &startup->security);
  gradsync::SetClusterSecurity(std::move(startup->security));
  absl::StatusOr<std::string> addr = daemon.Start();
  if (!addr.ok()) {
    std::cerr << "gradsync-worker: " << addr.status().message() << "\n";
    return 1;
  }
  gradsync::MetricsServer metrics(daemon.metrics_registry());
  if (absl::Status st =
          gradsync::StartMetricsEndpoint(&metrics, absl::GetFlag(FLAGS_metrics_listen));
      !st.ok()) {
    std::cerr << "gradsync-worker: --metrics_listen: " << st.message() << "\n";
    return 1;
  }
  std::cout << "listening on " << *addr << std::endl;
  if (const int sig = absl::GetFlag(FLAGS_restarted_after_signal); sig != 0) {
    spdlog::warn(
        "restarted after fatal signal {} ({}): the job that was running when it came "
        "failed as this worker lost; this worker is back under the same id",
        sig, strsignal(sig));
  }
  // From here on a crash on a job's thread restarts the daemon (a crash
  // before would loop).
  gradsync::RestartOnFatalSignals(own_argv);
  std::thread waiter([&daemon] {
    const int sig = gradsync::WaitForTerminationSignal();
    spdlog::info("signal {}: stopping", sig);
    daemon.Stop();
  });
  daemon.Run();
  // Run returns only after Stop; the waiter has returned by then, except when
  // Run ended otherwise, which it does not.
  waiter.join();
  return 0;
}
