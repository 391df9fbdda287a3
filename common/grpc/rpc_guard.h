// No exception escapes a synchronous gRPC handler: GuardRpc answers with the
// exception's status (common/exception_status.h: out of memory ->
// RESOURCE_EXHAUSTED, anything else -> INTERNAL) instead of relying on
// gRPC's catch-all, which answers UNKNOWN.
#ifndef GRADSYNC_COMMON_GRPC_RPC_GUARD_H_
#define GRADSYNC_COMMON_GRPC_RPC_GUARD_H_

#include <string>
#include <utility>

#include <grpcpp/support/status.h>

#include "absl/strings/string_view.h"
#include "common/exception_status.h"

namespace gradsync {

// Runs a handler body (returning grpc::Status); an exception becomes its
// status, the message starting with `where`.
template <typename F>
grpc::Status GuardRpc(absl::string_view where, F&& body) noexcept {
  try {
    return std::forward<F>(body)();
  } catch (...) {
    const absl::Status st = CurrentExceptionStatus(where);
    return grpc::Status(static_cast<grpc::StatusCode>(st.code()),
                        std::string(st.message()));
  }
}

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_GRPC_RPC_GUARD_H_
