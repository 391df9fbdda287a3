// Allreduce-job checkpoints kept by a PS shard (shard 0 in practice): a ring
// job's rank 0 sends its parameters and optimizer state in pieces, the shard
// writes each piece as a checkpoint file (common/checkpoint.h) and hands it
// back when a resumed job asks.
//
// Piece i of job J at step t lives in <root>/J/r<i>-<t>.ckpt with key
// "J/r<i>"; every piece keeps its newest two steps, so a checkpoint cut off
// half-way (rank 0 or this shard died) leaves the previous complete one in
// place, and PsStore::Checkpoints(J) lists the steps every piece has.
//
// Plain functions over the file system; thread-safe as long as no two
// callers write the same piece of the same job at once (a job has one
// sender: its rank 0, one piece at a time).
#ifndef GRADSYNC_SERVER_PS_ALLREDUCE_CHECKPOINTS_H_
#define GRADSYNC_SERVER_PS_ALLREDUCE_CHECKPOINTS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/checkpoint.h"

namespace gradsync {

// "r<index>".
std::string AllreduceCheckpointPieceName(int index);

// Writes piece `index` of `job`'s checkpoint at `step` (c.key is set here),
// then removes the piece's files but the newest two. FAILED_PRECONDITION
// when `root` is empty (the shard has no state directory), INVALID_ARGUMENT
// for a bad job id or index < 0, INTERNAL naming the file on an I/O error.
absl::Status SaveAllreduceCheckpointPiece(const std::string& root, const std::string& job,
                                          int64_t step, int index, CheckpointView c);

// Reads piece `index` of `job`'s checkpoint at `step`: as ReadCheckpoint
// (NOT_FOUND, DATA_LOSS naming the file, ...), and FAILED_PRECONDITION
// naming the file when it holds another job's piece or another step.
absl::StatusOr<Checkpoint> LoadAllreduceCheckpointPiece(const std::string& root,
                                                        const std::string& job,
                                                        int64_t step, int index);

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_PS_ALLREDUCE_CHECKPOINTS_H_
