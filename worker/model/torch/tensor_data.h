// Data sets of your own tensors (--data=tensors:PATH), read with libtorch.
//
// The file is what
//   torch.save({"x": X, "y": Y}, PATH)                       # or with a split:
//   torch.save({"x": X, "y": Y, "x_test": XT, "y_test": YT}, PATH)
// writes: X has one sample per row (any shape [N, ...], any real dtype; it
// is flattened to float32 [N, F]), Y the integer class of each ([N], values
// in [0, 256)). Without x_test/y_test the last tenth of the samples (at
// least one) is held out as the test set. Token ids of a language model are
// inputs like any other: they arrive as exact floats (up to 2^24) and the
// module turns them back with x.long().
#ifndef GRADSYNC_WORKER_MODEL_TORCH_TENSOR_DATA_H_
#define GRADSYNC_WORKER_MODEL_TORCH_TENSOR_DATA_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "worker/model/dataset.h"

namespace gradsync {

struct TensorData {
  Dataset train;
  Dataset test;
};

// INVALID_ARGUMENT naming the file and what is wrong (not a torch.save
// file, no "x" or "y", lengths that differ, labels that are not integers
// or lie outside [0, 256), train and test rows of different widths, fewer
// than 2 samples without a test split, tensors that claim more values than
// they store, values that would take more than 4 bytes of memory per byte
// of the file, as stride-0 (expanded) tensors do, refused before anything
// is allocated); NOT_FOUND for a missing file; the Env's errors for a file
// that cannot be read (FAILED_PRECONDITION for one that is not a regular
// file: a FIFO, /dev/zero). The file is read through `env`.
absl::StatusOr<TensorData> LoadTensorData(const std::string& path,
                                          const Env* env = Env::Default());

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_TORCH_TENSOR_DATA_H_
