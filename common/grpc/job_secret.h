// Job-scoped data-plane credentials (issue 9): who may move data for a job.
//
// Trust model. The cluster token (another layer) only says "this caller is
// part of the cluster"; it does not say "this caller is a member of job J".
// Membership is proven by the job's secret:
//   secret(J, world) = hex(HMAC-SHA256(K, "gradsync-job\n" J "\n" world))
// where K is the *job key*, 256 random bits read from /dev/urandom, held only
// by server processes (the coordinator and every PS shard: gradsync-server
// --job_key_file, or generated in memory by a lone --role=all server). The
// coordinator puts secret(J, world) into each Assignment of J (and only
// there); workers present it on every PS call and Peer stream of J.
//  - A PS shard recomputes the HMAC from the job id and the claimed world
//    size in the call's metadata: a match proves the caller was given the
//    secret by the coordinator, and that `world` is the job's (so ranks
//    outside [0, world) are refused). No coordinator round trip, no cache.
//  - A worker compares a Peer stream's secret with its own assignment's.
//  - The coordinator ends a job on its shards with the same secret (it can
//    compute it; outsiders cannot).
// Workers never see K: a worker of job A cannot derive job B's secret. The
// secrets are unpredictable without K (a PRF of the job id), and job ids are
// unique across restarts, so no secret is ever reused.
//
// Metadata keys (lower case, as gRPC requires).
#ifndef GRADSYNC_COMMON_GRPC_JOB_SECRET_H_
#define GRADSYNC_COMMON_GRPC_JOB_SECRET_H_

#include <map>
#include <string>

#include <grpcpp/support/string_ref.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradsync {

inline constexpr char kJobIdMetadata[] = "gradsync-job";
inline constexpr char kJobRankMetadata[] = "gradsync-rank";
inline constexpr char kJobWorldMetadata[] = "gradsync-world";
inline constexpr char kJobSecretMetadata[] = "gradsync-job-secret";
// A resuming job reads the checkpoints of the job it resumes from.
inline constexpr char kResumeWorldMetadata[] = "gradsync-resume-world";
inline constexpr char kResumeSecretMetadata[] = "gradsync-resume-secret";

// Bytes of a job key.
inline constexpr size_t kJobKeyBytes = 32;

// `n` bytes from /dev/urandom, hex-encoded. INTERNAL when it cannot be read.
absl::StatusOr<std::string> RandomHex(size_t n);

// True when a == b, in time independent of where they differ.
bool SecretsEqual(absl::string_view a, absl::string_view b);

// The value of metadata `key` in `md` ("" when absent).
std::string MetadataValue(const std::multimap<grpc::string_ref, grpc::string_ref>& md,
                          absl::string_view key);

// The server processes' key. Immutable, thread-safe.
class JobKey {
 public:
  // A fresh random key.
  static absl::StatusOr<JobKey> Generate();
  // Reads a key file: kJobKeyBytes or more bytes as hex (whitespace around
  // it ignored). INVALID_ARGUMENT / NOT_FOUND naming the file.
  static absl::StatusOr<JobKey> ReadFile(const std::string& path);
  // Writes a fresh key to `path` (mode 0600). For launchers.
  static absl::Status WriteNewFile(const std::string& path);

  // secret(job_id, world), 64 hex characters.
  std::string SecretOf(absl::string_view job_id, int world) const;
  // True when `secret` is secret(job_id, world) and world > 0.
  bool Verify(absl::string_view job_id, int world, absl::string_view secret) const;

 private:
  explicit JobKey(std::string raw) : raw_(std::move(raw)) {}
  std::string raw_;  // the key's bytes
};

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_GRPC_JOB_SECRET_H_
