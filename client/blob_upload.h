// Files that travel with a job: `--model=torchscript:PATH` is uploaded to
// the coordinator (Coordinator.PutBlob) before the job is submitted, and
// the job names it by hash.
#ifndef GRADSYNC_CLIENT_BLOB_UPLOAD_H_
#define GRADSYNC_CLIENT_BLOB_UPLOAD_H_

#include "absl/status/status.h"
#include "gradsync/v1/gradsync.grpc.pb.h"

namespace gradsync {

// When spec->model() is "torchscript:PATH": uploads PATH and rewrites the
// model to "torchscript:sha256:<hex>"; the same for spec->dataset()
// "tensors:PATH" (-> "tensors:sha256:<hex>"). A file this process uploaded
// before is not sent again. "tensors-on-workers:PATH" is not sent: it is
// hashed here and rewritten to "tensors-on-workers:sha256:<hex>:/ABS/PATH".
// Other models and data sets are left as they are. NOT_FOUND naming
// the path when the file cannot be read; the server's status (naming
// PutBlob) when it refuses it (e.g. over its --max_blob_bytes).
absl::Status UploadJobFiles(v1::Coordinator::Stub* stub, v1::JobSpec* spec);

}  // namespace gradsync

#endif  // GRADSYNC_CLIENT_BLOB_UPLOAD_H_
