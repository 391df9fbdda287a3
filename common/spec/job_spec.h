// Validation of submitted JobSpecs and the defaults filled into them.
#ifndef GRADSYNC_COMMON_SPEC_JOB_SPEC_H_
#define GRADSYNC_COMMON_SPEC_JOB_SPEC_H_

#include "absl/status/statusor.h"
#include "common/spec/model_spec.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {


// Returns the spec with defaults filled in (strategy "ring", mode "sync",
// model kDefaultModel, dataset "fashion-mnist", optimizer "sgd", lr 0.05,
// momentum 0.9 for sgd, epochs 1 when neither epochs nor steps is set,
// device "cpu", ps_shards 1, bucket 25 MB, chunk 1 MiB, step timeout 30 s;
// ring+async staleness 1).
// INVALID_ARGUMENT naming the field for: workers <= 0, unknown strategy, mode,
// model, dataset, optimizer or device, batch_size <= 0, a model whose input /
// output widths do not match the dataset, staleness < 0, lr < 0 or not finite,
// momentum outside [0, 1), epochs or steps < 0, ps_shards < 0 or more than
// `available_ps_shards`, negative sizes.
absl::StatusOr<v1::JobSpec> ValidateJobSpec(const v1::JobSpec& spec,
                                            int available_ps_shards);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_SPEC_JOB_SPEC_H_
