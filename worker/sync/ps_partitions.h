// What the PS client sends where: the partitions of the flat vector on their
// shards, and the credentials that go with every call. Below ps_client.h and
// ps_partition_calls.h, which both use them.
#ifndef GRADSYNC_WORKER_SYNC_PS_PARTITIONS_H_
#define GRADSYNC_WORKER_SYNC_PS_PARTITIONS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "common/ps_layout.h"
#include "common/spec/job_options.h"

namespace gradsync {

// Where one partition of the layout (common/ps_layout.h's PsPartition)
// lives, as the client addresses it: the key of its slice on its shard, the
// shard's address, and its range of the flat vector.
struct PsPartitionRef {
  std::string key;      // the slice's key, "JOB/p<index>"
  std::string address;  // shard
  uint64_t offset = 0;
  uint64_t count = 0;
};

// The partitions of `layout` (common/ps_layout.h) as the client sends them:
// partition i keyed "JOB/p<i>", on shards[partition.shard]. Requires every
// partition's shard to index `shards`.
std::vector<PsPartitionRef> MakePsPartitionRefs(const std::string& job_id,
                                                const std::vector<PsShardOptions>& shards,
                                                const PsLayout& layout);

// How `job` cuts `buckets` over its shards (job.ps_shards, at least one):
// in partitions of the shards' partition_bytes, or when that is 0 of
// PickPsPartitionBytes's size for the buckets' total, job.job_workers and
// `one_host`. Every rank of every generation computes the same layout. A
// training job's coordinator has decided one host already (JobTable::
// PickPsPartitions): it passes false; a bench passes whether its peer
// addresses are OnOneHost (common/grpc/grpc_util.h).
PsLayout MakeJobPsLayout(const JobOptions& job, const std::vector<Range>& buckets,
                         bool one_host = false);

// What proves to the PS shards that the caller is a member of its job
// (common/grpc/job_secret.h), sent as metadata on every call.
struct PsCredentials {
  std::string secret;         // JobOptions.job_secret
  int world = 0;              // JobOptions.world_size
  std::string resume_secret;  // JobOptions.resume_secret (resuming jobs)
  int resume_world = 0;
};
PsCredentials PsCredentialsOf(const JobOptions& job);
// `creds` as call metadata (key, value).
std::vector<std::pair<std::string, std::string>> PsCredentialMetadata(
    const PsCredentials& creds);
// Adds `creds` to a call's metadata.
void AddPsCredentials(const PsCredentials& creds, grpc::ClientContext* ctx);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SYNC_PS_PARTITIONS_H_
