// Exceptions stop at the edge of a thread or a handler: code that must not
// let one escape (a job thread, a pool task, an RPC body) runs its work under
// GuardStatus and gets the exception back as an absl::Status, so that the
// daemon reports it and stays up instead of ending in std::terminate.
// No gRPC here (common/grpc/rpc_guard.h adapts it to handlers).
#ifndef GRADSYNC_COMMON_EXCEPTION_STATUS_H_
#define GRADSYNC_COMMON_EXCEPTION_STATUS_H_

#include <exception>
#include <new>
#include <utility>

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

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_EXCEPTION_STATUS_H_
