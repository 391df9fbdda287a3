// The job table's views for the dashboard (see job_table.h, job_curves.h):
// jobs copied without their traces, with their curves and per-rank
// progress.
#include <deque>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/coordinator/job_table.h"

namespace gradsync {

v1::Job JobTable::CopyWithoutTraces(JobEntry* e) {
  google::protobuf::RepeatedPtrField<v1::WorkerTrace> traces;
  traces.Swap(e->job.mutable_result()->mutable_traces());
  v1::Job copy = e->job;
  traces.Swap(e->job.mutable_result()->mutable_traces());
  return copy;
}

absl::StatusOr<JobLive> JobTable::Live(const std::string& id) {
  JobEntry* e = Entry(id);
  if (e == nullptr) return absl::NotFoundError(absl::StrCat("no job ", id));
  JobLive live;
  live.job = CopyWithoutTraces(e);
  live.curve = e->curves.progress().Points();
  live.accuracy = e->curves.accuracy().Points();
  live.curve_stride = e->curves.progress().stride();
  live.ranks = e->curves.ranks();
  for (int r = 0; r < e->job.workers_size(); ++r) {
    const RegisteredWorker* w = workers_->Find(e->job.workers(r));
    live.rank_hosts.push_back(w == nullptr ? "" : w->peer_address);
    auto stall = e->stalls.find(r);
    live.rank_stalls.push_back(stall == e->stalls.end() ? "" : stall->second);
  }
  return live;
}

std::vector<JobLive> JobTable::Listing(size_t max_ended) {
  // ended is in end order, job_order_ in submission order.
  const std::deque<std::string>& ended = retention_.ended();
  const size_t skip = ended.size() > max_ended ? ended.size() - max_ended : 0;
  const std::set<std::string> left_out(ended.begin(), ended.begin() + skip);
  std::vector<JobLive> out;
  for (const std::string& id : job_order_) {
    if (left_out.count(id) > 0) continue;
    JobEntry* e = &jobs_.at(id);
    JobLive& live = out.emplace_back();
    live.job = CopyWithoutTraces(e);
    live.curve_stride = e->curves.progress().stride();
    if (e->curves.progress().offered() > 0)
      live.curve.push_back(e->curves.progress().Latest());
  }
  return out;
}

}  // namespace gradsync
