// The wire's dtype field (TensorHeader.dtype, JobSpec.wire_dtype) and the
// plain WireDtype (common/wire_dtype.h), both ways.
#ifndef GRADSYNC_COMMON_SPEC_WIRE_DTYPE_PROTO_H_
#define GRADSYNC_COMMON_SPEC_WIRE_DTYPE_PROTO_H_

#include "absl/status/statusor.h"
#include "common/wire_dtype.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

// INVALID_ARGUMENT for a value this build does not know; unspecified is fp32.
absl::StatusOr<WireDtype> WireDtypeOf(v1::WireDtype d);

// The dtype field for `d` (fp32 is written as unspecified, so fp32 frames are
// byte-identical to those of builds without 16-bit formats).
v1::WireDtype WireDtypeToProto(WireDtype d);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_SPEC_WIRE_DTYPE_PROTO_H_
