// What a worker daemon is started with (worker/main.cc reads it from the
// flags): its addresses, data directories, caches, helper, devices and
// clock. Read by the session half (WorkerDaemon) and the job half
// (JobRunner).
#ifndef GRADSYNC_WORKER_WORKER_OPTIONS_H_
#define GRADSYNC_WORKER_WORKER_OPTIONS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/env.h"
#include "common/spec/tuning_table.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

struct WorkerOptions {
  std::string coordinator;  // HOST:PORT
  std::string listen = "0.0.0.0:0";
  std::string advertise;  // default: listen host (0.0.0.0 -> 127.0.0.1);
                          // "auto": hostname:bound port
  // Port of the bulk Peer server (common/grpc/grpc_util.h "Bulk
  // connections") on the listen host, advertised with the advertised host;
  // 0: a free one; -1: none (peers send large collectives to `listen` too).
  int bulk_port = 0;
  std::string id;  // default: hostname-pid
  // Data directories (worker/model/data_dirs.h): `data_dir` is read by jobs
  // that name none ("" = kDefaultFashionMnistDir); a job naming one must
  // name `data_dir`, one of `allowed_data_dirs`, or a directory below them.
  std::string data_dir;
  std::vector<std::string> allowed_data_dirs;
  // Bytes of data sets kept in memory between jobs (worker/data_cache.h).
  int64_t data_cache_bytes = int64_t{2} << 30;
  // Bytes a TorchScript job's tensors may take (--max_job_memory, resolved
  // by main: worker/model/torch/memory_budget.h); <= 0: no limit.
  int64_t max_job_memory = 0;
  // Where fetched TorchScript models are kept by hash (worker/blob_fetch.h);
  // created at the first job that needs it.
  std::string cache_dir = "/tmp/gradsync-worker-cache";
  // The longest a model fetch may take.
  absl::Duration fetch_timeout = absl::Minutes(5);
  // The worker binary, run as a helper with a memory limit to read each
  // fetched model and data file first (worker/torch_file_check.h); main sets
  // it to /proc/self/exe. Empty (daemons inside tests): no helper.
  std::string helper_binary;
  // The TorchScript plugin that main set (--torch_plugin), passed on to the
  // helper; empty: the default places (worker/model/plugin_loader.h).
  std::string torch_plugin;
  int num_gpus = 0;  // GPUs this worker offers (0 without CUDA)
  int gpu = -1;      // GPU to use; -1: rank % num_gpus
  // BLAS threads of cpu jobs; 0: CpuComputeThreads(cores, ranks of the job
  // on this host), see worker/model/cpu_threads.h.
  int cpu_threads = 0;
  // --compute_slowdown: each step's forward/backward takes this many times
  // as long (TrainingOptions::compute_slowdown); 1 = off.
  double compute_slowdown = 1.0;
  // What ring jobs with algorithm auto run per bucket (--tuning_file, loaded
  // and checked in main); null: the built-in table.
  std::shared_ptr<const TuningTable> tuning;
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // A job told to end (cancelled, its session lost, the worker stopping)
  // whose thread is still running this long after is a runaway (a model
  // whose forward never returns): the daemon replaces itself with a fresh
  // run of `restart_argv` (worker/restart.h), or, when stopping, exits.
  absl::Duration runaway_grace = absl::Seconds(5);
  // The daemon's own command line, which main sets; empty (daemons inside
  // tests): a runaway job is only logged, and the worker stays busy.
  std::vector<std::string> restart_argv;
  // The daemon's clock and sleeps (heartbeats, session backoff, job
  // timers, and what it builds for jobs: transports, stall watches, the
  // PS client, the training loop's timers); not owned, outlives the daemon.
  // Its deadlines also go to gRPC, so it keeps real time.
  const Env* env = Env::Default();
  // Tests only: called at the start of every job (it may throw, to check
  // that no exception escapes the job thread).
  std::function<void(const v1::Assignment&)> throw_in_job_for_test;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_WORKER_OPTIONS_H_
