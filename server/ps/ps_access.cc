#include "server/ps/ps_access.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gradsync {

std::string JobOfSliceKey(const std::string& key) { return key.substr(0, key.find('/')); }

absl::Status PsAccess::Check(const std::string& job, const std::string& world_text,
                             const std::string& secret, std::optional<int> rank,
                             int* world) const {
  int w = 0;
  const bool member = key_ != nullptr && absl::SimpleAtoi(world_text, &w) &&
                      key_->Verify(job, w, secret) &&
                      (!rank || (*rank >= 0 && *rank < w));
  if (!member) {
    return absl::PermissionDeniedError(
        absl::StrCat("not a member of job ", job, " (or not one of its ranks)"));
  }
  if (world != nullptr) *world = w;
  return absl::OkStatus();
}

absl::Status PsAccess::CheckMember(const CallMetadata& md, const std::string& slice_key,
                                   int rank, int* world) const {
  return Check(JobOfSliceKey(slice_key), MetadataValue(md, kJobWorldMetadata),
               MetadataValue(md, kJobSecretMetadata), rank, world);
}

absl::Status PsAccess::CheckJob(const CallMetadata& md, const std::string& job_id) const {
  return Check(job_id, MetadataValue(md, kJobWorldMetadata),
               MetadataValue(md, kJobSecretMetadata), std::nullopt, nullptr);
}

absl::Status PsAccess::CheckResume(const CallMetadata& md,
                                   const std::string& old_job) const {
  return Check(old_job, MetadataValue(md, kResumeWorldMetadata),
               MetadataValue(md, kResumeSecretMetadata), std::nullopt, nullptr);
}

}  // namespace gradsync
