// Exceptions stop at the edge of a handler or a job thread: a daemon answers
// with a status and stays up, instead of relying on gRPC's catch-all (which
// answers UNKNOWN, and does not exist for callback reactors) or dying in
// std::terminate.
#ifndef GRADSYNC_COMMON_GRPC_RPC_GUARD_H_
#define GRADSYNC_COMMON_GRPC_RPC_GUARD_H_

#include <exception>
#include <new>
#include <string>
#include <utility>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gradsync {

// The status of the exception being handled (call only inside a catch
// block): std::bad_alloc -> RESOURCE_EXHAUSTED, anything else -> INTERNAL;
// the message starts with `where` ("PS Init", "rank 2 on worker w1").
inline absl::Status CurrentExceptionStatus(absl::string_view where) {
  try {
    throw;
  } catch (const std::bad_alloc& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat(where, ": out of memory (", e.what(), ")"));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(where, ": ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(where, ": unknown exception"));
  }
}

// Runs `body` (returning absl::Status); an exception becomes its status.
template <typename F>
absl::Status GuardStatus(absl::string_view where, F&& body) noexcept {
  try {
    return std::forward<F>(body)();
  } catch (...) {
    return CurrentExceptionStatus(where);
  }
}

// The same for a synchronous gRPC handler body (returning grpc::Status).
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
