// The job table's part of the job-scoped data plane (see job_table.h and
// common/grpc/job_secret.h): the secrets it hands out, and the final
// checksums every rank of a job must agree on.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/coordinator/job_table.h"

namespace gradsync {

std::shared_ptr<const JobKey> JobTable::KeyOrNew(std::shared_ptr<const JobKey> key) {
  if (key != nullptr) return key;
  absl::StatusOr<JobKey> made = JobKey::Generate();
  if (!made.ok()) {
    spdlog::error(
        "no job key ({}): jobs will be refused by their PS shards "
        "and peers",
        made.status().ToString());
    return nullptr;
  }
  return std::make_shared<const JobKey>(*std::move(made));
}

std::string JobTable::SecretOf(const std::string& job_id, int world) const {
  return job_key_ == nullptr ? "" : job_key_->SecretOf(job_id, world);
}

void JobTable::AddSecrets(const JobEntry& e, v1::Assignment* a) const {
  const v1::JobSpec& spec = e.job.spec();
  a->set_job_secret(SecretOf(a->job_id(), a->world_size()));
  // The checkpoint to start from: an elastic job's newest committed
  // generation, else spec.resume_from's (its newest committed generation
  // when it was elastic).
  const v1::Job* from = nullptr;
  if (e.job.generation() > 0 && Generations::Committed(e.job) >= 0) {
    from = &e.job;
  } else if (const JobEntry* old = Entry(spec.resume_from()); old != nullptr) {
    from = &old->job;
  }
  if (from == nullptr) return;  // a fresh start
  const int g = Generations::Committed(*from);
  const std::string id = GenerationJobId(from->id(), std::max(g, 0));
  const int world = g >= 0 ? Generations::World(*from, g) : from->spec().workers();
  a->set_resume_job_id(id);
  a->set_resume_world(world);
  a->set_resume_secret(SecretOf(id, world));
}

absl::Status JobTable::CheckFinalChecksums(const v1::JobResult& result,
                                           const std::string& what) {
  std::vector<std::string> differ;
  for (int r = 1; r < result.param_checksums_size(); ++r) {
    if (result.param_checksums(r) != result.param_checksums(0)) {
      differ.push_back(absl::StrCat("rank ", r, " has ", result.param_checksums(r)));
    }
  }
  if (differ.empty()) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(what, ": rank 0 has ",
                                          result.param_checksums(0), ", ",
                                          absl::StrJoin(differ, ", ")));
}

}  // namespace gradsync
