// The coordinator's reads for the dashboard (dashboard_server.h): the job
// table's views and the live workers, copied under the mutex.
#include "server/coordinator/coordinator.h"

namespace gradsync {

ClusterLive Coordinator::DashboardOverview(size_t max_ended) {
  ClusterLive cluster;
  cluster.now_ms = absl::ToUnixMillis(env_->Now());
  absl::MutexLock lock(&mu_);
  cluster.jobs = jobs_.Listing(max_ended);
  for (const RegisteredWorker* w : workers_.Live()) {
    cluster.workers.push_back(WorkerInfoOf(*w));
  }
  cluster.ps_shards = jobs_.num_ps_shards();
  return cluster;
}

absl::StatusOr<JobLive> Coordinator::DashboardJob(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return jobs_.Live(id);
}

}  // namespace gradsync
