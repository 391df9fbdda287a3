// Checkpoint files: a slice of parameters with its optimizer state and step,
// written atomically and refused when damaged.
//
// Layout (little-endian, as the host writes it; v1):
//   magic "GSYNCKPT" (8 bytes), u32 version (= kCheckpointVersion),
//   u32 key length, key bytes (what was checkpointed, e.g. "j-3/p1"),
//   i64 step (updates applied), i64 optimizer steps,
//   u64 params, u64 first moment, u64 second moment (float counts),
//   the floats of params, first moment, second moment in that order,
//   u32 CRC-32 (zlib) of every byte before it.
//
// Writing: <path>.tmp, fsync, rename to <path>, fsync the directory, so a
// crash leaves either the old file or the new one, never a torn one.
#ifndef GRADSYNC_COMMON_CHECKPOINT_H_
#define GRADSYNC_COMMON_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/env.h"

namespace gradsync {

inline constexpr uint32_t kCheckpointVersion = 1;

struct Checkpoint {
  std::string key;
  int64_t step = 0;
  std::vector<float> params;
  int64_t optimizer_steps = 0;
  std::vector<float> first_moment;   // sgd momentum / adam m; may be empty
  std::vector<float> second_moment;  // adam v; may be empty
};

// What WriteCheckpoint writes, by reference (no copy of the floats).
struct CheckpointView {
  std::string key;
  int64_t step = 0;
  absl::Span<const float> params;
  int64_t optimizer_steps = 0;
  absl::Span<const float> first_moment;
  absl::Span<const float> second_moment;
};

// Writes `c` to `path` atomically (see above), creating missing parent
// directories. INTERNAL naming the file on an I/O error (the temporary file
// is removed).
// The file goes through `env` (Env::WriteFileAtomically).
absl::Status WriteCheckpoint(const std::string& path, const CheckpointView& c,
                             const Env* env = Env::Default());

// Reads and verifies `path`. NOT_FOUND when it does not exist; DATA_LOSS
// naming the file when it is truncated, its magic or CRC-32 is wrong, or its
// sizes do not match its length; FAILED_PRECONDITION for another version.
// A file that fails any check is never returned.
// The file comes through `env` (Env::ReadFileToString).
absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path,
                                          const Env* env = Env::Default());

// "<dir>/<piece>-<step>.ckpt": the checkpoint file of one piece of a job.
std::string CheckpointFile(const std::string& dir, const std::string& piece,
                           int64_t step);

// The steps of every piece with checkpoint files (named as CheckpointFile)
// in `dir`; empty when the directory does not exist. Files are not opened.
std::map<std::string, std::set<int64_t>> ListCheckpoints(const std::string& dir);

// Removes the files of `piece` in `dir` but the newest `keep` steps (best
// effort: a file that cannot be removed stays).
void PruneCheckpoints(const std::string& dir, const std::string& piece, int keep);

// Whether `job_id` may name a checkpoint directory: non-empty, not starting
// with '.', no '/' or '\\'.
bool IsCheckpointJobId(const std::string& job_id);

// The steps at which every piece in `listing` has a checkpoint.
std::set<int64_t> CommonSteps(const std::map<std::string, std::set<int64_t>>& listing);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_CHECKPOINT_H_
