// gradsync's allreduce (the ring, or --algorithm) against Gloo's ring, side by side in one run, one
// process per rank on loopback (as the daemons run), nccl-tests conventions:
// time = median over iterations of the slowest rank, algbw = bytes / time,
// busbw = algbw * 2(N-1)/N. Runs alternate gloo, gradsync, gloo, ... for
// `--rounds` rounds so that drift on a noisy machine hits both alike.
//
//   build/bench/allreduce_compare --ranks=2 --sizes=64M --rounds=3
//
// Every result is checked (ranks fill rank+1, the sum is N(N+1)/2, exact in
// float32). Each timed allreduce starts after a barrier (the implementation's
// own: gloo::barrier, or a one-float gradsync recursive doubling), so a rank's time never
// includes a peer still filling or checking its tensor. Prints one row per (round, implementation, size) and a summary
// of gradsync/gloo busbw ratios; --json=FILE writes the rows.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/transport_flags.h"
#include "common/process_setup.h"
#include "common/spec/job_spec.h"
#include "worker/collectives/allreduce_factory.h"
#include "worker/collectives/recursive_doubling.h"
#include "worker/collectives/transport/grpc/grpc_transport.h"

ABSL_FLAG(int, ranks, 2, "Processes (ranks) per allreduce.");
ABSL_FLAG(std::string, sizes, "64M",
          "Comma-separated tensor sizes in bytes; K, M, G suffixes (powers of "
          "two).");
ABSL_FLAG(int, iters, 10, "Timed allreduces per size.");
ABSL_FLAG(int, warmup, 3, "Untimed allreduces per size before the timed ones.");
ABSL_FLAG(int, rounds, 3, "Alternating gloo/gradsync rounds.");
ABSL_FLAG(std::string, impl, "both", "gloo, gradsync or both.");
ABSL_FLAG(int, base_port, 47300,
          "gradsync ranks listen on base_port + rank on 127.0.0.1.");
ABSL_FLAG(int64_t, segment_bytes, 1 << 20, "gradsync ring segment size.");
ABSL_FLAG(std::string, algorithm, "ring",
          "gradsync's allreduce: ring, hd (halving-doubling) or rd (recursive doubling) "
          "(recursive doubling); Gloo always runs its ring.");
ABSL_FLAG(int, connections, 1,
          "gradsync: TCP connections per peer (segments striped over them).");
ABSL_FLAG(std::string, json, "", "Write the rows as JSON to this file.");
ABSL_FLAG(int64_t, peer_bulk_bytes, 4 << 20,
          "gradsync: allreduces of at least this many bytes go on the bulk "
          "connections (ports base_port + ranks + rank, no BDP probing), as "
          "in a job; 0 = never.");

namespace gradsync {
namespace {

struct Config {
  int ranks;
  std::vector<size_t> sizes;
  int iters;
  int warmup;
};

absl::StatusOr<size_t> ParseSize(absl::string_view s) {
  size_t mult = 1;
  if (!s.empty()) {
    switch (s.back()) {
      case 'K':
        mult = size_t{1} << 10;
        break;
      case 'M':
        mult = size_t{1} << 20;
        break;
      case 'G':
        mult = size_t{1} << 30;
        break;
      default:
        break;
    }
    if (mult != 1) s.remove_suffix(1);
  }
  // The multiple-of-4 rule applies to the bytes, so "1M" is fine and "6" not.
  uint64_t v = 0;
  if (!absl::SimpleAtoi(s, &v) || v == 0 || v > (uint64_t{1} << 40) / mult ||
      (v * mult) % sizeof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sizes: '", s, "' is not a positive multiple of 4 bytes (at most 1T)"));
  }
  return v * mult;
}

// One rank's seconds per timed iteration, per size.
using RankTimes = std::vector<std::vector<double>>;

bool Check(const std::vector<float>& data, int ranks) {
  const float want = static_cast<float>(ranks * (ranks + 1) / 2);
  // No early exit, so the loop vectorizes (it runs on every iteration).
  bool bad = false;
  for (float x : data) bad |= x != want;
  return !bad;
}

// Runs barrier(), then fn(data, n) timed, warmup + iters times per size;
// returns the timed seconds, or an empty result when a check failed or fn
// or barrier reported an error.
template <typename Fn, typename Barrier>
RankTimes TimeSizes(const Config& c, int rank, Fn fn, Barrier barrier) {
  RankTimes out;
  for (size_t bytes : c.sizes) {
    std::vector<float> data(bytes / sizeof(float));
    std::vector<double> times;
    for (int i = 0; i < c.warmup + c.iters; ++i) {
      std::fill(data.begin(), data.end(), static_cast<float>(rank + 1));
      if (!barrier()) return {};
      const absl::Time t0 = absl::Now();
      if (!fn(data.data(), data.size(), i)) return {};
      const double s = absl::ToDoubleSeconds(absl::Now() - t0);
      if (!Check(data, c.ranks)) {
        std::fprintf(stderr, "rank %d: wrong sum at %zu bytes\n", rank, bytes);
        return {};
      }
      if (i >= c.warmup) times.push_back(s);
    }
    out.push_back(std::move(times));
  }
  return out;
}

RankTimes RunGloo(const Config& c, int rank, const std::string& dir) {
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(dir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, c.ranks);
  ctx->connectFullMesh(store, dev);
  return TimeSizes(
      c, rank,
      [&](float* data, size_t n, int) {
        gloo::AllreduceOptions opts(ctx);
        opts.setOutput(data, n);
        opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        opts.setReduceFunction(
            static_cast<void (*)(void*, const void*, const void*, size_t)>(
                &gloo::sum<float>));
        gloo::allreduce(opts);
        return true;
      },
      [&] {
        gloo::BarrierOptions opts(ctx);
        gloo::barrier(opts);
        return true;
      });
}

RankTimes RunGradsync(const Config& c, int rank) {
  const int base = absl::GetFlag(FLAGS_base_port);
  std::vector<std::string> peers;
  std::vector<std::string> bulk_peers;  // as the workers' --bulk_port
  for (int r = 0; r < c.ranks; ++r) {
    peers.push_back(absl::StrCat("127.0.0.1:", base + r));
    bulk_peers.push_back(absl::StrCat("127.0.0.1:", base + c.ranks + r));
  }
  PeerMailboxes mailboxes;
  PeerService service(&mailboxes);
  PeerService bulk_service(&mailboxes);
  absl::StatusOr<StartedServer> server = StartPeerServer(peers[rank], {&service});
  absl::StatusOr<StartedServer> bulk_server =
      StartPeerServer(bulk_peers[rank], {&bulk_service}, /*bulk=*/true);
  for (const auto* s : {&server, &bulk_server}) {
    if (!s->ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, s->status().ToString().c_str());
      return {};
    }
  }
  const std::string job = "compare";
  RankTimes out;
  {
    GrpcTransportOptions topts;
    topts.connections_per_peer = absl::GetFlag(FLAGS_connections);
    const int64_t bulk = absl::GetFlag(FLAGS_peer_bulk_bytes);
    topts.bulk_bytes = bulk > 0 ? static_cast<size_t>(bulk) : 0;
    topts.bulk_peer_addresses = bulk_peers;
    // Every rank of this benchmark knows the job; a fixed secret will do.
    topts.job_secret = job;
    GrpcTransport transport(
        job, rank, peers,
        mailboxes.Open(job, topts.job_secret, static_cast<int>(peers.size())), topts);
    AllreduceOptions opts;
    opts.segment_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_segment_bytes));
    opts.timeout = absl::Seconds(60);
    // Checked in Main before any rank starts.
    const AllreduceAlgorithm algorithm =
        ParseAllreduceAlgorithm(absl::GetFlag(FLAGS_algorithm)).value();
    int64_t step = 0;
    auto report = [rank](const absl::Status& st) {
      if (!st.ok()) std::fprintf(stderr, "rank %d: %s\n", rank, st.ToString().c_str());
      return st.ok();
    };
    // The barrier: an allreduce of one float, as bucket 1 of the same step
    // (frames from one peer arrive in order, so it never meets the data's).
    RecursiveDoublingAllreduce one(&transport, 1, opts);
    float token = 0;
    out = TimeSizes(
        c, rank,
        [&](float* data, size_t n, int) {
          absl::StatusOr<std::unique_ptr<Allreduce>> op =
              MakeAllreduce(algorithm, &transport, n, opts);
          if (!op.ok()) return report(op.status());
          return report((*op)->Run(data, step++, 0));
        },
        [&] { return report(one.Run(&token, step, 1)); });
    // Keep serving until every rank is done sending to us.
    absl::SleepFor(absl::Milliseconds(200));
  }
  server->server->Shutdown(ToChrono(absl::Now() + absl::Seconds(1)));
  bulk_server->server->Shutdown(ToChrono(absl::Now() + absl::Seconds(1)));
  return out;
}

void WriteTimes(const std::string& path, const RankTimes& t) {
  std::ofstream f(path);
  for (const auto& size : t) {
    for (double s : size) f << s << ' ';
    f << '\n';
  }
}

RankTimes ReadTimes(const std::string& path) {
  RankTimes t;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    std::vector<double> row;
    for (absl::string_view tok : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      double v;
      if (absl::SimpleAtod(tok, &v)) row.push_back(v);
    }
    t.push_back(row);
  }
  return t;
}

// Forks one process per rank; returns each rank's times, or empty on failure.
std::vector<RankTimes> RunRanks(const Config& c, const std::string& impl,
                                const std::string& dir) {
  std::vector<pid_t> pids;
  for (int r = 0; r < c.ranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      RankTimes t = impl == "gloo" ? RunGloo(c, r, dir) : RunGradsync(c, r);
      if (t.empty()) _exit(1);
      WriteTimes(absl::StrCat(dir, "/times.", r), t);
      _exit(0);
    }
    pids.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!ok) return {};
  std::vector<RankTimes> all;
  for (int r = 0; r < c.ranks; ++r) {
    all.push_back(ReadTimes(absl::StrCat(dir, "/times.", r)));
  }
  return all;
}

// Median over iterations of the slowest rank, for size index s.
double MedianOfSlowest(const std::vector<RankTimes>& all, size_t s) {
  std::vector<double> slowest;
  for (size_t i = 0; i < all[0][s].size(); ++i) {
    double m = 0;
    for (const RankTimes& r : all) m = std::max(m, r[s][i]);
    slowest.push_back(m);
  }
  std::sort(slowest.begin(), slowest.end());
  return slowest[slowest.size() / 2];
}

struct Row {
  int round;
  std::string impl;
  size_t bytes;
  double seconds;
  double busbw;
};

int Main() {
  Config c{absl::GetFlag(FLAGS_ranks),
           {},
           absl::GetFlag(FLAGS_iters),
           absl::GetFlag(FLAGS_warmup)};
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',')) {
    absl::StatusOr<size_t> v = ParseSize(s);
    if (!v.ok()) {
      std::fprintf(stderr, "%s\n", v.status().ToString().c_str());
      return 2;
    }
    c.sizes.push_back(*v);
  }
  absl::StatusOr<AllreduceAlgorithm> algorithm =
      ParseAllreduceAlgorithm(absl::GetFlag(FLAGS_algorithm));
  if (!algorithm.ok() || *algorithm == AllreduceAlgorithm::kHierarchical ||
      *algorithm == AllreduceAlgorithm::kAuto) {
    std::fprintf(stderr, "--algorithm: want ring, hd or rd\n");
    return 2;
  }
  if (c.ranks < 2 || c.iters < 1 || c.warmup < 0) {
    std::fprintf(stderr, "need --ranks >= 2, --iters >= 1, --warmup >= 0\n");
    return 2;
  }
  std::vector<std::string> impls;
  const std::string which = absl::GetFlag(FLAGS_impl);
  if (which == "both" || which == "gloo") impls.push_back("gloo");
  if (which == "both" || which == "gradsync") impls.push_back("gradsync");
  if (impls.empty()) {
    std::fprintf(stderr, "--impl: want gloo, gradsync or both\n");
    return 2;
  }
  std::vector<Row> rows;
  const double bus = 2.0 * (c.ranks - 1) / c.ranks;
  std::printf("%5s %-9s %12s %10s %10s\n", "round", "impl", "bytes", "time_ms",
              "busbw_GB/s");
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    for (const std::string& impl : impls) {
      char tmpl[] = "/tmp/gs-compare-XXXXXX";
      const std::string dir = mkdtemp(tmpl);
      std::vector<RankTimes> all = RunRanks(c, impl, dir);
      std::system(absl::StrCat("rm -rf ", dir).c_str());
      if (all.empty()) {
        std::fprintf(stderr, "%s round %d FAILED\n", impl.c_str(), round);
        return 1;
      }
      for (size_t s = 0; s < c.sizes.size(); ++s) {
        const double t = MedianOfSlowest(all, s);
        rows.push_back({round, impl, c.sizes[s], t, c.sizes[s] / t * bus / 1e9});
        std::printf("%5d %-9s %12zu %10.3f %10.3f\n", round, impl.c_str(), c.sizes[s],
                    t * 1e3, rows.back().busbw);
        std::fflush(stdout);
      }
    }
  }
  if (impls.size() == 2) {
    std::printf("gradsync/gloo busbw, per size (median over rounds):\n");
    for (size_t bytes : c.sizes) {
      std::vector<double> ratios;
      for (const Row& g : rows) {
        if (g.impl != "gloo" || g.bytes != bytes) continue;
        for (const Row& o : rows) {
          if (o.impl == "gradsync" && o.bytes == bytes && o.round == g.round) {
            ratios.push_back(o.busbw / g.busbw);
          }
        }
      }
      std::sort(ratios.begin(), ratios.end());
      std::printf("  %12zu bytes: %.2fx\n", bytes, ratios[ratios.size() / 2]);
    }
  }
  const std::string json = absl::GetFlag(FLAGS_json);
  if (!json.empty()) {
    std::ofstream f(json);
    f << "{\"ranks\": " << c.ranks << ", \"rows\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
      f << (i ? ",\n" : "\n") << "{\"round\": " << rows[i].round << ", \"impl\": \""
        << rows[i].impl << "\", \"bytes\": " << rows[i].bytes
        << ", \"seconds\": " << rows[i].seconds << ", \"busbw_gbps\": " << rows[i].busbw
        << "}";
    }
    f << "\n]}\n";
  }
  return 0;
}

}  // namespace
}  // namespace gradsync

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "gradsync's allreduce (ring, or --algorithm) vs Gloo's ring, one "
      "process per rank on loopback.\n  allreduce_compare --ranks=2 "
      "--sizes=64M --rounds=3");
  absl::ParseCommandLine(argc, argv);
  // As the daemons start (no abseil deadlock detection, the allocator's
  // thresholds, denormals flushed): the ranks are measured as they run in
  // a job.
  gradsync::PrepareDaemonProcess();
  // --peer_bdp_probe (common/grpc/transport_flags.h), as workers take it.
  gradsync::ApplyTransportFlags();
  return gradsync::Main();
}
