#include "client/trace_json.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/trace/trace.h"

namespace gradsync {
namespace {

nlohmann::json Metadata(const char* what, int pid, int tid, const nlohmann::json& args) {
  nlohmann::json m = {{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", args}};
  if (tid >= 0) m["tid"] = tid;
  return m;
}

nlohmann::json Event(const v1::TraceEvent& e, int pid, int64_t t0) {
  std::string name = e.name();
  if (e.bucket() >= 0) absl::StrAppend(&name, " b", e.bucket());
  if (e.layer() >= 0) absl::StrAppend(&name, " L", e.layer());
  nlohmann::json j = {{"name", name},
                      {"cat", e.category()},
                      {"pid", pid},
                      {"tid", e.thread()},
                      {"ts", e.start_us() - t0}};
  if (e.dur_us() < 0) {
    j["ph"] = "i";
    j["s"] = "t";
  } else {
    j["ph"] = "X";
    j["dur"] = e.dur_us();
  }
  nlohmann::json args = nlohmann::json::object();
  if (e.step() >= 0) args["step"] = e.step();
  if (e.bucket() >= 0) args["bucket"] = e.bucket();
  if (e.layer() >= 0) args["layer"] = e.layer();
  j["args"] = args;
  return j;
}

int64_t FirstStart(const v1::JobResult& r) {
  int64_t t0 = std::numeric_limits<int64_t>::max();
  for (const v1::WorkerTrace& t : r.traces()) {
    for (const v1::TraceEvent& e : t.events()) t0 = std::min(t0, e.start_us());
  }
  return t0 == std::numeric_limits<int64_t>::max() ? 0 : t0;
}

}  // namespace

nlohmann::json MergedTrace(const v1::Job& job) {
  const int64_t t0 = FirstStart(job.result());
  nlohmann::json events = nlohmann::json::array();
  nlohmann::json dropped = nlohmann::json::object();
  for (const v1::WorkerTrace& t : job.result().traces()) {
    const int pid = t.rank();
    // Rank -1: the coordinator's lane of an elastic job (generations).
    const bool coordinator = t.rank() < 0;
    events.push_back(Metadata(
        "process_name", pid, -1,
        {{"name", coordinator
                      ? std::string("coordinator: elastic generations")
                      : absl::StrCat("rank ", t.rank(), " (", t.worker_id(), ")")}}));
    events.push_back(Metadata("process_sort_index", pid, -1, {{"sort_index", t.rank()}}));
    std::set<int> threads;
    for (const v1::TraceEvent& e : t.events()) {
      threads.insert(e.thread());
      events.push_back(Event(e, pid, t0));
    }
    for (int tid : threads) {
      const std::string thread = !coordinator
                                     ? TraceThreadName(tid)
                                     : (tid == 0 ? "generations" : "re-formations");
      events.push_back(Metadata("thread_name", pid, tid, {{"name", thread}}));
      events.push_back(Metadata("thread_sort_index", pid, tid, {{"sort_index", tid}}));
    }
    dropped[std::to_string(t.rank())] = t.dropped();
  }
  return {{"traceEvents", events},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"job_id", job.id()},
            {"start_unix_us", t0},
            {"dropped_events_per_rank", dropped}}}};
}

absl::Status WriteTrace(const v1::Job& job, const std::string& path) {
  if (job.result().traces_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", job.id(),
                     " has no trace (submitted without "
                     "--trace, or the coordinator no longer keeps it)"));
  }
  std::ofstream out(path);
  out << MergedTrace(job).dump() << "\n";
  if (!out) {
    return absl::UnavailableError(absl::StrCat("cannot write trace to ", path));
  }
  return absl::OkStatus();
}

std::string TracePath(const std::string& flag, const std::string& job_id,
                      bool several_jobs) {
  if (flag.empty()) return absl::StrCat("trace-", job_id, ".json");
  if (!several_jobs) return flag;
  const bool json = absl::EndsWith(flag, ".json");
  return absl::StrCat(json ? flag.substr(0, flag.size() - 5) : flag, "-", job_id,
                      ".json");
}

}  // namespace gradsync
