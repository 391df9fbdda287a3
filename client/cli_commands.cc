// The commands that dial --server (submit, watch, status, cancel, list) and
// what every command shares: reaching the coordinator, watching a job,
// printing it, writing its results and trace.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "client/blob_upload.h"
#include "client/cli.h"
#include "client/job_watch.h"
#include "client/report.h"
#include "client/trace_json.h"
#include "common/grpc/grpc_util.h"

namespace gradsync {
namespace {

// submit --resume=ID: job ID's spec, resuming from its checkpoint.
v1::JobSpec ResumeSpec(v1::Coordinator::Stub* stub, const std::string& id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(10)));
  v1::GetJobRequest req;
  req.set_id(id);
  v1::Job old;
  grpc::Status st = stub->GetJob(&ctx, req, &old);
  if (!st.ok()) Die(absl::StrCat("submit --resume: ", RpcError(st)), 2);
  v1::JobSpec spec = old.spec();
  spec.set_resume_from(id);
  return spec;
}

// Prints a job's events as they come (progress on one line on a terminal,
// every 2 s otherwise) and feeds them to `timeline` when given.
class EventPrinter {
 public:
  EventPrinter(std::string label, bool quiet, JobTimeline* timeline)
      : label_(std::move(label)), quiet_(quiet), timeline_(timeline), tty_(isatty(1)) {}
  // Ends a progress line left open.
  ~EventPrinter() {
    if (pending_cr_) std::printf("\n");
  }

  void operator()(const v1::JobEvent& ev) {
    if (timeline_ != nullptr) timeline_->Add(ev, absl::Now());
    if (quiet_) return;
    const std::string line = EventLine(ev, label_);
    if (line.empty()) return;
    if (ev.kind() == v1::JobEvent::PROGRESS) {
      if (ev.step() == 0) return;
      if (tty_) {
        std::printf("\r\033[K%s", line.c_str());
        std::fflush(stdout);
        pending_cr_ = true;
      } else if (absl::Now() - last_line_ > absl::Seconds(2)) {
        std::printf("%s\n", line.c_str());
        last_line_ = absl::Now();
      }
      return;
    }
    if (pending_cr_) std::printf("\r\033[K");
    pending_cr_ = false;
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }

 private:
  const std::string label_;
  const bool quiet_;
  JobTimeline* const timeline_;
  const bool tty_;
  absl::Time last_line_ = absl::InfinitePast();
  bool pending_cr_ = false;
};

// Streams the job's events (into `timeline` too, when given); returns the
// final job (GetJob after the end). Interrupted: cancels the job instead
// and returns what CancelJob answered.
v1::Job Watch(v1::Coordinator::Stub* stub, const std::string& id,
              const std::string& label, const CliOptions& o, Interruption* interruption,
              JobTimeline* timeline = nullptr) {
  absl::StatusOr<WatchEnd> end;
  {
    EventPrinter printer(label, o.quiet, timeline);
    WatchHooks hooks;
    hooks.on_event = [&printer](const v1::JobEvent& ev) { printer(ev); };
    // A Ctrl-C that came before the watch existed still ends it.
    hooks.set_context = [interruption](grpc::ClientContext* ctx) {
      interruption->SetWatched(ctx);
    };
    hooks.interrupted = interruption->flag();
    end = WatchToEnd(stub, id, hooks);
  }
  if (!end.ok()) Die(std::string(end.status().message()));
  if (end->interrupted) {
    const std::string why = interruption->reason();
    std::cerr << "gradsync: " << (why.empty() ? "interrupted" : why) << "; cancelled "
              << id << std::endl;
  }
  return end->job;
}

void PrintListJson(const v1::ListJobsResponse& resp) {
  nlohmann::json j;
  j["jobs"] = nlohmann::json::array();
  for (const v1::Job& job : resp.jobs()) j["jobs"].push_back(JobToJson(job));
  j["workers"] = nlohmann::json::array();
  for (const v1::WorkerInfo& w : resp.workers()) {
    j["workers"].push_back({{"id", w.id()},
                            {"peer_address", w.peer_address()},
                            {"state", w.state()},
                            {"job_id", w.job_id()},
                            {"num_gpus", w.num_gpus()}});
  }
  std::printf("%s\n", j.dump(2).c_str());
}

}  // namespace

void Interruption::Interrupt() {
  interrupted_ = true;
  absl::MutexLock lock(&mu_);
  if (watched_ != nullptr) watched_->TryCancel();
}

void Interruption::Stop(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (reason_.empty()) reason_ = reason;
  interrupted_ = true;
  if (watched_ != nullptr) watched_->TryCancel();
}

std::string Interruption::reason() const {
  absl::MutexLock lock(&mu_);
  return reason_;
}

void Interruption::SetWatched(grpc::ClientContext* ctx) {
  absl::MutexLock lock(&mu_);
  watched_ = ctx;
  if (ctx != nullptr && interrupted_) ctx->TryCancel();
}

void Die(const std::string& msg, int code) {
  std::cerr << "gradsync: " << msg << std::endl;
  std::exit(code);
}

std::unique_ptr<v1::Coordinator::Stub> Connect(const std::string& addr) {
  auto channel = MakeChannel(addr);
  absl::Status st = WaitForConnected(channel.get(), addr, absl::Now() + absl::Seconds(3));
  if (!st.ok()) {
    Die(absl::StrCat("cannot reach the coordinator at ", addr,
                     " (connection refused or timed out; is gradsync-server running?)"));
  }
  return v1::Coordinator::NewStub(channel);
}

void WriteResults(const CliOptions& o, const std::vector<v1::Job>& jobs, bool as_list,
                  const std::vector<JobTimeline>* timelines) {
  const std::string& path = o.results;
  if (path.empty()) return;
  std::vector<nlohmann::json> each;
  for (size_t i = 0; i < jobs.size(); ++i) {
    each.push_back(JobToJson(jobs[i]));
    if (timelines != nullptr) each.back()["timeline"] = (*timelines)[i].ToJson();
  }
  nlohmann::json j = as_list ? nlohmann::json{{"jobs", each}} : each.front();
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) Die(absl::StrCat("cannot write results to ", path));
  std::printf("results written to %s\n", path.c_str());
}

void WriteTraces(const CliOptions& o, const std::vector<v1::Job>& jobs) {
  if (!o.trace) return;
  for (const v1::Job& job : jobs) {
    if (job.state() != v1::SUCCEEDED) continue;
    const std::string path = TracePath(o.trace_file, job.id(), jobs.size() > 1);
    absl::Status st = WriteTrace(job, path);
    if (!st.ok()) Die(std::string(st.message()));
    std::printf("trace written to %s\n", path.c_str());
  }
}

void PrintJob(const v1::Job& job) {
  const v1::JobResult& r = job.result();
  std::printf("%s  %s  %s  workers=%d  state=%s%s\n", job.id().c_str(),
              StrategyLabel(job.spec()).c_str(), job.spec().model().c_str(),
              job.spec().workers(), v1::JobState_Name(job.state()).c_str(),
              job.error().empty() && job.error_code() == 0
                  ? ""
                  : absl::StrCat("  error: ", JobErrorText(job)).c_str());
  if (job.state() == v1::SUCCEEDED) {
    std::printf(
        "  test_accuracy=%.4f final_train_loss=%.4f wall=%.2fs samples/s=%.0f "
        "comm=%.2fs\n",
        r.test_accuracy(), r.final_train_loss(), r.wall_seconds(), r.samples_per_second(),
        r.comm_seconds());
    const auto& per = r.steps_per_rank();
    if (!per.empty() &&
        std::any_of(per.begin(), per.end(), [&](int64_t s) { return s != per[0]; })) {
      // ps async: the steps were the job's; a slow rank ran fewer.
      std::string line;
      for (int i = 0; i < static_cast<int>(per.size()); ++i) {
        absl::StrAppend(&line, " rank", i, "=", per[i]);
      }
      std::printf("  steps per rank:%s (the job's %ld steps are pushes / workers)\n",
                  line.c_str(), static_cast<long>(r.steps()));
    }
    if (r.has_slowest_rank() && r.slowest_rank().ratio() >= 1.5) {
      const v1::SlowestRank& slow = r.slowest_rank();
      std::printf(
          "  slowest rank: %d (%s), %.1fx the others' median compute per step "
          "(%.1f ms against %.1f ms)%s\n",
          slow.rank(), slow.worker_id().c_str(), slow.ratio(),
          1e3 * slow.seconds_per_step(), 1e3 * slow.others_median(),
          slow.named() ? "; named a straggler during the run" : "");
    }
  } else if (job.state() == v1::RUNNING) {
    std::printf("  step %ld/%ld\n", static_cast<long>(job.step()),
                static_cast<long>(job.total_steps()));
  }
  const std::string how = HowItSynchronised(job);
  if (!how.empty()) std::printf("  %s\n", how.c_str());
  // Queued, or an elastic job between generations.
  if ((job.state() == v1::QUEUED || job.state() == v1::RUNNING) &&
      !job.waiting_for().empty()) {
    std::printf("  waiting: %s\n", job.waiting_for().c_str());
  }
  if (job.spec().elastic() && job.generation() > 0) {
    std::printf("  generation %d on %d of %d workers (min %d)\n", job.generation(),
                job.workers_size(), job.spec().workers(), job.spec().min_workers());
  }
  for (const std::string& stall : job.stalls()) {
    std::printf("  stall: %s\n", stall.c_str());
  }
}

int SubmitAndWatch(v1::Coordinator::Stub* stub, const v1::JobSpec& spec, bool watch,
                   const CliOptions& o, Interruption* interruption, v1::Job* final_job,
                   JobTimeline* timeline) {
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  if (absl::Status up = UploadJobFiles(stub, req.mutable_spec()); !up.ok()) {
    Die(absl::StrCat("submit: ", up.message()), 2);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(10)));
  v1::Job job;
  grpc::Status st = stub->SubmitJob(&ctx, req, &job);
  if (!st.ok()) Die(absl::StrCat("submit: ", RpcError(st)), 2);
  if (!watch) {
    std::printf("%s\n", job.id().c_str());
    *final_job = job;
    return 0;
  }
  *final_job =
      Watch(stub, job.id(), StrategyLabel(job.spec()), o, interruption, timeline);
  return final_job->state() == v1::SUCCEEDED ? 0 : 1;
}

int SubmitCommand(const CliOptions& o, Interruption* interruption) {
  auto stub = Connect(o.server);
  v1::Job job;
  const v1::JobSpec spec = o.resume.empty() ? o.spec() : ResumeSpec(stub.get(), o.resume);
  std::vector<JobTimeline> timeline(1);
  int rc = SubmitAndWatch(stub.get(), spec, o.wait, o, interruption, &job, &timeline[0]);
  if (o.wait) {
    PrintJob(job);
    WriteResults(o, {job}, false, &timeline);
    WriteTraces(o, {job});
  }
  return rc;
}

int WatchCommand(const CliOptions& o, const std::string& id, Interruption* interruption) {
  auto stub = Connect(o.server);
  std::vector<JobTimeline> timeline(1);
  v1::Job job = Watch(stub.get(), id, id, o, interruption, &timeline[0]);
  PrintJob(job);
  WriteResults(o, {job}, false, &timeline);
  WriteTraces(o, {job});
  return job.state() == v1::SUCCEEDED ? 0 : 1;
}

int StatusOrCancelCommand(const CliOptions& o, const std::string& cmd,
                          const std::string& id) {
  auto stub = Connect(o.server);
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
  v1::Job job;
  grpc::Status st;
  if (cmd == "status") {
    v1::GetJobRequest req;
    req.set_id(id);
    st = stub->GetJob(&ctx, req, &job);
  } else {
    v1::CancelJobRequest req;
    req.set_id(id);
    st = stub->CancelJob(&ctx, req, &job);
  }
  if (!st.ok()) Die(absl::StrCat(cmd, " ", id, ": ", RpcError(st)));
  if (o.json) {
    std::printf("%s\n", JobToJson(job).dump(2).c_str());
  } else {
    PrintJob(job);
  }
  return 0;
}

int ListCommand(const CliOptions& o) {
  auto stub = Connect(o.server);
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
  v1::ListJobsResponse resp;
  grpc::Status st = stub->ListJobs(&ctx, v1::ListJobsRequest(), &resp);
  if (!st.ok()) Die(absl::StrCat("list: ", RpcError(st)));
  if (o.json) {
    PrintListJson(resp);
    return 0;
  }
  std::printf("workers (%d), PS shards available: %d\n", resp.workers_size(),
              resp.ps_shards());
  for (const v1::WorkerInfo& w : resp.workers()) {
    std::printf("  %-12s %-22s %-5s %s\n", w.id().c_str(), w.peer_address().c_str(),
                w.state().c_str(), w.job_id().c_str());
  }
  std::printf("jobs (%d)\n", resp.jobs_size());
  for (const v1::Job& job : resp.jobs()) PrintJob(job);
  return 0;
}

}  // namespace gradsync
