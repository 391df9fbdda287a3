// Which calls a PS shard serves (issue 9, job-scoped data plane): a call for
// job J must prove membership of J with J's secret, and a rank must be one
// of J's ranks. The trust model is in common/grpc/job_secret.h; in short,
// the shard holds the job key K and recomputes secret(J, world) from the
// job id and the world size the caller claims in its metadata.
//
// Refusals are PERMISSION_DENIED naming only the job: they say nothing about
// whether the job exists here, its step or its size.
//
// Thread-safe (immutable).
#ifndef GRADSYNC_SERVER_PS_PS_ACCESS_H_
#define GRADSYNC_SERVER_PS_PS_ACCESS_H_

#include <map>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/support/string_ref.h>

#include "absl/status/status.h"
#include "common/grpc/job_secret.h"

namespace gradsync {

using CallMetadata = std::multimap<grpc::string_ref, grpc::string_ref>;

// "j-3/p1" -> "j-3" (a PS slice key's job).
std::string JobOfSliceKey(const std::string& key);

class PsAccess {
 public:
  // `key` null: every call is refused (without the key no member can be
  // told from an outsider; gradsync-server does not start a --role=ps shard
  // without --job_key_file).
  explicit PsAccess(std::shared_ptr<const JobKey> key) : key_(std::move(key)) {}

  // A data call on slice `slice_key` by `rank`: `md` must carry
  // kJobWorldMetadata and kJobSecretMetadata of the slice's job, and the
  // rank must be in [0, world). `world` (may be null) receives the proven
  // world size.
  absl::Status CheckMember(const CallMetadata& md, const std::string& slice_key, int rank,
                           int* world = nullptr) const;
  // A call for job `job_id` that names no rank (EndJob): as CheckMember.
  absl::Status CheckJob(const CallMetadata& md, const std::string& job_id) const;

  // Reading the checkpoints of ended job `old_job` (Checkpoints, and an Init
  // that resumes from it): `md` must carry kResumeWorldMetadata and
  // kResumeSecretMetadata of `old_job`.
  absl::Status CheckResume(const CallMetadata& md, const std::string& old_job) const;

 private:
  absl::Status Check(const std::string& job, const std::string& world_text,
                     const std::string& secret, std::optional<int> rank,
                     int* world) const;

  const std::shared_ptr<const JobKey> key_;
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_PS_PS_ACCESS_H_
