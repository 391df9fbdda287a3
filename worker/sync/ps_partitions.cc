#include "worker/sync/ps_partitions.h"

#include "absl/strings/str_cat.h"
#include "common/grpc/job_secret.h"

namespace gradsync {

PsLayout MakeJobPsLayout(const JobOptions& job, const std::vector<Range>& buckets,
                         bool one_host) {
  const int shards = static_cast<int>(job.ps_shards.size());
  const int64_t named = shards > 0 ? job.ps_shards[0].partition_bytes : 0;
  return MakePsLayout(
      buckets, shards,
      ResolvePsPartitionBytes(named, buckets, shards, job.job_workers, one_host));
}

std::vector<PsPartitionRef> MakePsPartitionRefs(const std::string& job_id,
                                                const std::vector<PsShardOptions>& shards,
                                                const PsLayout& layout) {
  std::vector<PsPartitionRef> refs;
  refs.reserve(layout.partitions.size());
  for (const PsPartition& part : layout.partitions) {
    PsPartitionRef p;
    p.key = absl::StrCat(job_id, "/p", part.index);
    p.address = shards[part.shard].address;
    p.offset = part.range.begin;
    p.count = part.range.size;
    refs.push_back(std::move(p));
  }
  return refs;
}

PsCredentials PsCredentialsOf(const JobOptions& job) {
  PsCredentials c;
  c.secret = job.job_secret;
  c.world = job.world_size;
  c.resume_secret = job.resume_secret;
  c.resume_world = job.resume_world;
  return c;
}

std::vector<std::pair<std::string, std::string>> PsCredentialMetadata(
    const PsCredentials& creds) {
  std::vector<std::pair<std::string, std::string>> md = {
      {kJobWorldMetadata, std::to_string(creds.world)},
      {kJobSecretMetadata, creds.secret}};
  if (!creds.resume_secret.empty()) {
    md.emplace_back(kResumeWorldMetadata, std::to_string(creds.resume_world));
    md.emplace_back(kResumeSecretMetadata, creds.resume_secret);
  }
  return md;
}

void AddPsCredentials(const PsCredentials& creds, grpc::ClientContext* ctx) {
  for (const auto& [key, value] : PsCredentialMetadata(creds)) {
    ctx->AddMetadata(key, value);
  }
}

}  // namespace gradsync
