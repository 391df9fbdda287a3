#include "common/spec/wire_dtype_proto.h"

#include "absl/strings/str_cat.h"

namespace gradsync {

absl::StatusOr<WireDtype> WireDtypeOf(v1::WireDtype d) {
  switch (d) {
    case v1::WIRE_DTYPE_UNSPECIFIED:
    case v1::WIRE_DTYPE_FP32:
      return WireDtype::kFp32;
    case v1::WIRE_DTYPE_BF16:
      return WireDtype::kBf16;
    case v1::WIRE_DTYPE_FP16:
      return WireDtype::kFp16;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown wire dtype ", static_cast<int>(d)));
}

v1::WireDtype WireDtypeToProto(WireDtype d) {
  switch (d) {
    case WireDtype::kFp32:
      return v1::WIRE_DTYPE_UNSPECIFIED;
    case WireDtype::kBf16:
      return v1::WIRE_DTYPE_BF16;
    case WireDtype::kFp16:
      return v1::WIRE_DTYPE_FP16;
  }
  return v1::WIRE_DTYPE_UNSPECIFIED;
}

}  // namespace gradsync
