// The `gradsync` commands other than bench (client/bench_command.h): local,
// submit, watch, status, cancel and list. client/main.cc defines the flags,
// parses them into CliOptions once and dispatches; the commands live in
// cli_commands.cc (those that dial --server) and local_command.cc.
//
// A command reports a fatal error with Die: the message on stderr as
// "gradsync: ...", then exit (2 for bad flags and refused submissions, 1
// otherwise). Part of the gradsync executable, not of the gradsync_client
// library, since it exits.
#ifndef GRADSYNC_CLIENT_CLI_H_
#define GRADSYNC_CLIENT_CLI_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/timeline.h"
#include "gradsync/v1/gradsync.grpc.pb.h"

namespace gradsync {

// What the commands take from the flags (see their help in client/main.cc).
struct CliOptions {
  std::string server;      // --server: the coordinator's HOST:PORT
  bool wait = false;       // submit: watch the job until it ends
  std::string resume;      // submit: the ended job to resume from
  bool json = false;       // status/list: JSON instead of text
  bool quiet = false;      // no progress lines
  std::string results;     // results JSON path; empty: none
  bool trace = false;      // write each traced job's timeline
  std::string trace_file;  // its path (TracePath); empty: the default
  // local only
  bool compare = false;        // run the job under each of `pairs`
  std::string pairs;           // "ps-sync,allreduce-async,..."
  bool compare_warmup = true;  // --compare: a one-step job first, unreported
  bool autotune = true;        // ring + auto: tune on the cluster first
  std::string strategy;        // without --compare: the one pair
  std::string mode;
  int workers = 4;
  int ps_shards = 1;
  std::string log_dir;     // empty: a new /tmp/gradsync-local-* directory
  std::string dashboard;   // local: the server's --dashboard_listen; empty: off
  double slow_worker = 1;  // local: the last worker's --compute_slowdown
  std::vector<std::string> worker_flags;  // local: more flags for every worker
  std::string data_dir;
  std::string tuning_file;
  std::string log_level;
  double heartbeat_timeout = 6.0;
  int64_t ps_inline_bytes = -1;  // the shards' --ps_inline_bytes; < 0: theirs
  std::string tls_dir;           // empty: plaintext
  // The job spec the job flags describe; Dies (2) naming a flag whose value
  // is not one of its names. Called only when a command builds a job (after
  // it has reached the coordinator).
  std::function<v1::JobSpec()> spec;
};

// Ctrl-C state shared by main's signal thread and the commands.
// Thread-safe.
class Interruption {
 public:
  // From the signal thread: marks the command interrupted and cancels the
  // watched call, if any.
  void Interrupt();
  // As Interrupt, from the command itself, with the reason to report (e.g.
  // `local`'s watchdog: one of its daemons died). The first reason stays.
  void Stop(const std::string& reason);
  bool interrupted() const { return interrupted_; }
  // Stop's reason; "" after a Ctrl-C (or nothing).
  std::string reason() const;
  // For LocalClusterOptions and CommandHooks; lives as long as this object.
  const std::atomic<bool>* flag() const { return &interrupted_; }
  // The call a Ctrl-C cancels (nullptr: none). A call set after the
  // interruption is cancelled at once.
  void SetWatched(grpc::ClientContext* ctx);

 private:
  std::atomic<bool> interrupted_{false};
  mutable absl::Mutex mu_;
  grpc::ClientContext* watched_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string reason_ ABSL_GUARDED_BY(mu_);
};

// The commands; each returns the process's exit code.
int LocalCommand(const CliOptions& o, Interruption* interruption);
int SubmitCommand(const CliOptions& o, Interruption* interruption);
int WatchCommand(const CliOptions& o, const std::string& id, Interruption* interruption);
// `status ID` or `cancel ID` (`cmd`).
int StatusOrCancelCommand(const CliOptions& o, const std::string& cmd,
                          const std::string& id);
int ListCommand(const CliOptions& o);

// ---- shared by the commands (cli_commands.cc)

// Prints "gradsync: MSG" to stderr and exits with `code`.
[[noreturn]] void Die(const std::string& msg, int code = 1);

// The value of a text flag naming an enum; exits 2 naming the field when it
// is not one of the names.
template <typename E>
E EnumFlag(const absl::StatusOr<E>& parsed) {
  if (!parsed.ok()) Die(std::string(parsed.status().message()), 2);
  return *parsed;
}

// A stub on a connected channel to the coordinator; Dies when it cannot be
// reached within 3 s.
std::unique_ptr<v1::Coordinator::Stub> Connect(const std::string& addr);

// Submits `spec`; with `watch`, follows it to its end (events into
// `timeline` when given) and returns 0 when it SUCCEEDED, 1 otherwise;
// without, prints its id and returns 0. `*final_job` is the job last seen.
int SubmitAndWatch(v1::Coordinator::Stub* stub, const v1::JobSpec& spec, bool watch,
                   const CliOptions& o, Interruption* interruption, v1::Job* final_job,
                   JobTimeline* timeline = nullptr);

// One job in text: id, strategy, state, error, results or progress, stalls.
void PrintJob(const v1::Job& job);

// --results: the jobs as a results file (a list with `as_list`, else the
// one job); `timelines`, when given, has one entry per job. Nothing when
// o.results is empty.
void WriteResults(const CliOptions& o, const std::vector<v1::Job>& jobs, bool as_list,
                  const std::vector<JobTimeline>* timelines = nullptr);

// --trace: writes each traced job's merged timeline (trace_json.h).
void WriteTraces(const CliOptions& o, const std::vector<v1::Job>& jobs);

}  // namespace gradsync

#endif  // GRADSYNC_CLIENT_CLI_H_
