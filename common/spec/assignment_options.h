// The one conversion from the wire's Assignment to a rank's plain
// JobOptions (common/spec/job_options.h), done where the worker accepts a
// job (worker/job_runner.cc).
#ifndef GRADSYNC_COMMON_SPEC_ASSIGNMENT_OPTIONS_H_
#define GRADSYNC_COMMON_SPEC_ASSIGNMENT_OPTIONS_H_

#include "absl/status/statusor.h"
#include "common/spec/job_options.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

// The options of a validated assignment (the coordinator filled in the
// spec's defaults; a bench job's spec leaves strategy and mode unset, which
// read as ValidateJobSpec's defaults, allreduce and sync). INVALID_ARGUMENT
// naming the field for what validation would have refused: an unknown
// strategy, mode or wire dtype, bad groups (ParseGroups), a rank
// outside [0, world_size).
absl::StatusOr<JobOptions> JobOptionsOf(const v1::Assignment& assignment);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_SPEC_ASSIGNMENT_OPTIONS_H_
