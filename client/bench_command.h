// `gradsync bench` and `gradsync local bench`: submit a bench job (a
// collective timed and verified on the workers the coordinator assigns),
// watch it, print one nccl-tests style row per size, write the results JSON
// and, with --tune, a tuning table (common/spec/tuning_table.h format).
#ifndef GRADSYNC_CLIENT_BENCH_COMMAND_H_
#define GRADSYNC_CLIENT_BENCH_COMMAND_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cost_model.h"
#include "gradsync/v1/gradsync.grpc.pb.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

// Everything a bench command needs, parsed once from the flags.
struct BenchCommandOptions {
  bool local = false;  // `local bench`: start our own cluster
  std::string server;  // coordinator HOST:PORT (not local)
  int workers = 4;
  v1::BenchOp op = v1::BENCH_OP_ALLREDUCE;
  v1::Algorithm algorithm = v1::ALGORITHM_AUTO;
  std::vector<int64_t> sizes;  // bytes
  int iters = 20;
  int warmup = 5;
  int ps_shards = 1;               // pushpull: shards the job uses
  int64_t ps_partition_bytes = 0;  // pushpull: largest partition (0: submit picks)
  int64_t chunk_bytes = 1 << 20;
  int step_timeout_ms = 30000;
  int connections_per_peer = 1;
  int64_t peer_bulk_bytes = 0;  // JobSpec.peer_bulk_bytes
  v1::WireDtype wire_dtype = v1::WIRE_DTYPE_FP32;
  std::string groups;   // hier: a host group id per rank, "0,0,1,1"
  std::string results;  // results JSON path; empty = none
  std::string tune;     // tuning file path; empty = no tuning run
  // --tune: passes over ring, hd and rd, in alternating order.
  int tune_passes = 2;
  bool quiet = false;
  // local only
  std::string log_dir;      // empty: a new /tmp/gradsync-local-* directory
  std::string tuning_file;  // workers' --tuning_file; empty = built-in
  std::string log_level = "warn";
  double heartbeat_timeout = 6.0;
  int64_t ps_inline_bytes = -1;  // the shards' --ps_inline_bytes; < 0: theirs
};

// What the CLI's main lends a command: Ctrl-C state and a way to make a
// Ctrl-C cancel the watch in progress (nullptr when the watch ends).
struct CommandHooks {
  const std::atomic<bool>* interrupted = nullptr;
  std::function<void(grpc::ClientContext*)> set_watch_context;
};

// One byte count: digits, optionally followed by K, M or G (also KiB, MiB,
// GiB; binary multiples; case-insensitive). INVALID_ARGUMENT otherwise.
absl::StatusOr<int64_t> ParseByteCount(absl::string_view text);

// --sizes: a comma list of byte counts and ranges LO:HI (powers of two
// times LO up to HI, as nccl-tests -b LO -e HI -f 2), e.g. "4K:256M",
// "4K,1M,64M", "1048580". INVALID_ARGUMENT starting "sizes: " for an empty
// list, a bad count, LO > HI, a size that is not a positive multiple of 4
// bytes (float32 elements), over 1 GiB, or more than 64 sizes.
absl::StatusOr<std::vector<int64_t>> ParseBenchSizes(absl::string_view text);

// The options from the command-line flags; INVALID_ARGUMENT naming the flag.
// Defined in bench_flags.cc, which only the gradsync executable links.
absl::StatusOr<BenchCommandOptions> BenchOptionsFromFlags(bool local);

// One printed row, computed from a finished bench job.
struct BenchRowReport {
  int64_t bytes = 0;
  std::string algorithm;
  double time_seconds = 0;         // median over iterations of the slowest rank
  double algbw = 0;                // bytes / time, bytes per second
  double busbw = 0;                // see BusBandwidthFactor
  double model_seconds = 0;        // α-β model (common/cost_model.h), 0 if unknown
  double ratio = 0;                // model_seconds / time_seconds ("% of model")
  int64_t ps_partition_bytes = 0;  // pushpull: the size this row was cut in
  bool ok = false;
  std::string error;
};

// busbw = algbw × this. allreduce: 2(N−1)/N (nccl-tests); broadcast: 1;
// pushpull: PushPullLinkFactor(N, S, K, partition_bytes) (common/cost_model.h), the bytes the
// busiest link (a worker's, or a shard's) moves per byte of K, the same
// accounting as the cost model. So busbw = β whenever a run matches the
// model's bandwidth term.
double BusBandwidthFactor(v1::BenchOp op, int workers, int ps_shards, int64_t bytes,
                          int64_t partition_bytes = 0);

// The cost model's link inputs for a bench result over `workers` ranks:
// its host groups; the link between hosts as α and β (ranks 0 and 1's when
// the result has none: every rank on one host, or a result from before
// 2026-11-27); the link inside a host as the local one (none: as α, β).
CostInputs LinkInputs(const v1::BenchResult& b, int workers);

// The rows of a finished bench job (empty when it has no bench result). The
// model (common/cost_model.h) uses LinkInputs.
std::vector<BenchRowReport> BenchRows(const v1::Job& job);

// The nccl-tests style table: a header naming op, workers, α and β, then
// one line per row.
std::string FormatBenchTable(const v1::Job& job, const std::vector<BenchRowReport>& rows);

// The results JSON of one bench job: {"op", "algorithm_requested",
// "workers", "alpha_seconds", "beta_bytes_per_second" (ranks 0 and 1),
// "between_hosts" and "inside_host" ({"ranks": [a, b], "alpha_seconds",
// "beta_bytes_per_second"}, null when not measured), "host_groups" (one
// group id per rank), "rows": [{"bytes",
// "algorithm", "time_seconds", "algbw", "busbw", "model_seconds", "ratio",
// "ok", "iteration_seconds": [...], "rank_iteration_seconds": [[...] per
// rank]}]} plus "job_id", "state", "error", "iters", "warmup", "ps_shards".
nlohmann::json BenchToJson(const v1::Job& job, const std::vector<BenchRowReport>& rows);

// A tuning table (common/spec/tuning_table.h format) for `world` ranks
// from runs of several algorithms over the same sizes (with --tune_passes,
// several runs of each): for each size the algorithm with the lowest mean
// time over its rows, among those whose every row at that size is OK;
// sizes in ascending order; consecutive sizes with the same winner merge
// into one rule; the largest size's winner also covers 'inf'. Sizes where
// no algorithm qualifies are skipped. A comment line per size lists every
// algorithm's mean ("# 4096 B: hd 201.3 us, ring 244.0 us, tree FAILED").
std::string TuningLines(int world, const std::vector<std::vector<BenchRowReport>>& runs);

// The rows `TuningLines` should count for one --tune job that requested
// `requested` over `sizes`: its rows when it SUCCEEDED, else a FAILED row
// (named AlgorithmName(requested)) for every size, so that an algorithm
// whose job failed cannot win on its other passes.
std::vector<BenchRowReport> TuningRowsOf(const v1::Job& job, v1::Algorithm requested,
                                         const std::vector<int64_t>& sizes);

// Runs the command; returns the process exit code: 0 when the job (every
// job with --tune) succeeded and every row is OK; 1 otherwise; 2 for bad
// input; 130 after Ctrl-C.
int RunBenchCommand(const BenchCommandOptions& options, const CommandHooks& hooks);

}  // namespace gradsync

#endif  // GRADSYNC_CLIENT_BENCH_COMMAND_H_
