#include "server/ps/allreduce_checkpoints.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace gradsync {
namespace {

// Every piece keeps this many steps: the newest may be incomplete.
constexpr int kKeptSteps = 2;

absl::Status CheckArgs(const std::string& root, const std::string& job, int index) {
  if (root.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job,
                     " uses checkpoints but this PS shard has no state "
                     "directory"));
  }
  if (!IsCheckpointJobId(job)) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint of '", job, "': not a job id"));
  }
  if (index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint piece ", index, " of ", job));
  }
  return absl::OkStatus();
}

}  // namespace

std::string AllreduceCheckpointPieceName(int index) { return absl::StrCat("r", index); }

absl::Status SaveAllreduceCheckpointPiece(const std::string& root, const std::string& job,
                                          int64_t step, int index, CheckpointView c) {
  if (absl::Status st = CheckArgs(root, job, index); !st.ok()) return st;
  const std::string dir = absl::StrCat(root, "/", job);
  const std::string piece = AllreduceCheckpointPieceName(index);
  c.key = absl::StrCat(job, "/", piece);
  c.step = step;
  absl::Status st = WriteCheckpoint(CheckpointFile(dir, piece, step), c);
  if (!st.ok()) return st;
  PruneCheckpoints(dir, piece, kKeptSteps);
  return absl::OkStatus();
}

absl::StatusOr<Checkpoint> LoadAllreduceCheckpointPiece(const std::string& root,
                                                        const std::string& job,
                                                        int64_t step, int index) {
  if (absl::Status st = CheckArgs(root, job, index); !st.ok()) return st;
  const std::string piece = AllreduceCheckpointPieceName(index);
  const std::string path = CheckpointFile(absl::StrCat(root, "/", job), piece, step);
  absl::StatusOr<Checkpoint> c = ReadCheckpoint(path);
  if (!c.ok()) return c.status();
  const std::string want = absl::StrCat(job, "/", piece);
  if (c->key != want || c->step != step) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", path, " holds ", c->key, " at step ", c->step,
                     "; wanted ", want, " at step ", step));
  }
  return c;
}

}  // namespace gradsync
