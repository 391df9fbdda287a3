// The flags of `gradsync bench` / `local bench` (the ones only they use;
// the shared ones are defined in client/main.cc), parsed into
// BenchCommandOptions once. Part of the gradsync executable, not of the
// gradsync_client library, so that tests can link the library without the
// CLI's flags.
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/bench_command.h"
#include "common/ps_layout.h"
#include "common/spec/job_spec.h"

ABSL_FLAG(std::string, op, "allreduce",
          "bench: the collective to time: allreduce (--algorithm over the "
          "workers), broadcast (ring, from rank 0) or pushpull (push a "
          "gradient and pull the parameters through --ps_shards PS shards).");
ABSL_FLAG(std::string, sizes, "4K:256M",
          "bench: message sizes in bytes (multiples of 4): LO:HI for powers "
          "of two times LO up to HI, or a comma list (4K,1M,64M); K/M/G are "
          "KiB/MiB/GiB; at most 64 sizes of at most 1G.");
ABSL_FLAG(int, iters, 20, "bench: timed iterations per size; every result is verified.");
ABSL_FLAG(int, warmup, 5, "bench: untimed iterations per size before timing.");
ABSL_FLAG(std::string, tune, "",
          "bench: run allreduce with ring, hd and rd over --sizes and write "
          "a tuning table (the fastest per size, lines WORLD MAX_BYTES "
          "ALGORITHM, common/spec/tuning_table.h format) to this file.");
ABSL_FLAG(int, tune_passes, 2,
          "bench --tune: how many times to run each of ring, hd and rd "
          "(1..10; alternating ring-hd-rd and rd-hd-ring); a size goes to "
          "the lowest mean time over the passes.");

// Shared with the other commands (client/main.cc).
ABSL_DECLARE_FLAG(std::string, server);
ABSL_DECLARE_FLAG(int, workers);
ABSL_DECLARE_FLAG(int, ps_shards);
ABSL_DECLARE_FLAG(int64_t, ps_partition_bytes);
ABSL_DECLARE_FLAG(std::string, algorithm);
ABSL_DECLARE_FLAG(int64_t, chunk_bytes);
ABSL_DECLARE_FLAG(int, step_timeout_ms);
ABSL_DECLARE_FLAG(int, connections_per_peer);
ABSL_DECLARE_FLAG(int64_t, peer_bulk_bytes);
ABSL_DECLARE_FLAG(std::string, wire_dtype);
ABSL_DECLARE_FLAG(std::string, tuning_file);
ABSL_DECLARE_FLAG(std::string, groups);
ABSL_DECLARE_FLAG(std::string, results);
ABSL_DECLARE_FLAG(bool, quiet);
ABSL_DECLARE_FLAG(std::string, log_dir);
ABSL_DECLARE_FLAG(std::string, log_level);
ABSL_DECLARE_FLAG(double, heartbeat_timeout);
ABSL_DECLARE_FLAG(int64_t, ps_inline_bytes);

namespace gradsync {

absl::StatusOr<BenchCommandOptions> BenchOptionsFromFlags(bool local) {
  BenchCommandOptions o;
  o.local = local;
  o.server = absl::GetFlag(FLAGS_server);
  o.workers = absl::GetFlag(FLAGS_workers);
  absl::StatusOr<v1::BenchOp> op = ParseBenchOp(absl::GetFlag(FLAGS_op));
  if (!op.ok()) return op.status();
  o.op = *op;
  absl::StatusOr<v1::Algorithm> algorithm =
      ParseAlgorithm(absl::GetFlag(FLAGS_algorithm));
  if (!algorithm.ok()) return algorithm.status();
  o.algorithm = *algorithm;
  absl::StatusOr<std::vector<int64_t>> sizes =
      ParseBenchSizes(absl::GetFlag(FLAGS_sizes));
  if (!sizes.ok()) return sizes.status();
  o.sizes = *std::move(sizes);
  o.iters = absl::GetFlag(FLAGS_iters);
  o.warmup = absl::GetFlag(FLAGS_warmup);
  o.ps_shards = absl::GetFlag(FLAGS_ps_shards);
  o.ps_partition_bytes = absl::GetFlag(FLAGS_ps_partition_bytes);
  o.chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes);
  o.step_timeout_ms = absl::GetFlag(FLAGS_step_timeout_ms);
  o.connections_per_peer = absl::GetFlag(FLAGS_connections_per_peer);
  o.peer_bulk_bytes = absl::GetFlag(FLAGS_peer_bulk_bytes);
  absl::StatusOr<v1::WireDtype> wire = ParseWireDtype(absl::GetFlag(FLAGS_wire_dtype));
  if (!wire.ok()) return wire.status();
  o.wire_dtype = *wire;
  o.groups = absl::GetFlag(FLAGS_groups);
  o.results = absl::GetFlag(FLAGS_results);
  o.tune = absl::GetFlag(FLAGS_tune);
  o.quiet = absl::GetFlag(FLAGS_quiet);
  o.log_dir = absl::GetFlag(FLAGS_log_dir);
  o.tuning_file = absl::GetFlag(FLAGS_tuning_file);
  o.log_level = absl::GetFlag(FLAGS_log_level);
  o.heartbeat_timeout = absl::GetFlag(FLAGS_heartbeat_timeout);
  o.ps_inline_bytes = absl::GetFlag(FLAGS_ps_inline_bytes);
  if (o.ps_inline_bytes >= 0) {  // < 0: the shards' default
    if (absl::Status st = CheckPsInlineBytes(o.ps_inline_bytes); !st.ok()) {
      return st;
    }
  }
  o.tune_passes = absl::GetFlag(FLAGS_tune_passes);
  if (o.tune_passes < 1 || o.tune_passes > 10) {
    return absl::InvalidArgumentError(
        absl::StrCat("tune_passes: must be in [1, 10], got ", o.tune_passes));
  }
  if (!o.tune.empty() && o.op != v1::BENCH_OP_ALLREDUCE) {
    return absl::InvalidArgumentError("tune: only for --op=allreduce");
  }
  return o;
}

}  // namespace gradsync
