// Where a resumed ps job starts: the last step at which every PS slice of
// the old job has a checkpoint (asked of every shard with the Checkpoints
// RPC). Each rank asks on its own; the old job has ended, so its files no
// longer change and every rank gets the same answer.
#ifndef GRADSYNC_WORKER_SYNC_PS_RESUME_H_
#define GRADSYNC_WORKER_SYNC_PS_RESUME_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gradsync/v1/gradsync.grpc.pb.h"
#include "worker/sync/ps_client.h"

namespace gradsync {

// The Checkpoints listing of `job` on the shard behind `channel` (at
// `address`, for the error), with `creds`; a failed call's status names the
// job and the shard. Used by PS and ring resumption alike.
absl::StatusOr<v1::CheckpointsResponse> ListCheckpoints(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& address,
    const std::string& job, const PsCredentials& creds, absl::Time deadline);

// The largest step in every shard's list of common steps (shards with no
// slice of the job do not count). NOT_FOUND naming the job when no shard has
// a checkpoint of it or no step is common to all; a shard's RPC error (with
// its address) otherwise. `creds` must hold the old job's resume secret
// (PERMISSION_DENIED from the shards otherwise).
absl::StatusOr<int64_t> FindResumeStep(const std::string& old_job,
                                       const std::set<std::string>& shards,
                                       const PsCredentials& creds, absl::Time deadline);

// The step from the shards' answers: `lists[i]` the common steps of shard i,
// `slices[i]` its slices with checkpoints. Pure; the rule above.
absl::StatusOr<int64_t> PickResumeStep(const std::string& old_job,
                                       const std::vector<std::vector<int64_t>>& lists,
                                       const std::vector<int>& slices);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_SYNC_PS_RESUME_H_
