// Strings that cross the wire as proto3 `string` fields must be valid UTF-8:
// a message holding other bytes fails to parse at the receiver, which then
// sees a broken session instead of the error it carried (issue 51: a
// libtorch error quoting a module's non-UTF-8 bytes made a worker look
// lost). Text from outside gradsync (a user's model or data, an OS error)
// goes through these before it is sent.
#ifndef GRADSYNC_COMMON_GRPC_VALID_UTF8_H_
#define GRADSYNC_COMMON_GRPC_VALID_UTF8_H_

#include <string>

#include <google/protobuf/message.h>

#include "absl/strings/string_view.h"

namespace gradsync {

// Whether `text` is well-formed UTF-8 (no overlong forms, no surrogates,
// nothing above U+10FFFF).
bool IsValidUtf8(absl::string_view text);

// `text` with every byte that does not start a well-formed UTF-8 sequence
// written as the four characters "\xNN" (lowercase hex); valid text comes
// back unchanged.
std::string ValidUtf8(absl::string_view text);

// Every string field (singular, repeated, in nested messages) of `m` that
// is not valid UTF-8 rewritten with ValidUtf8; bytes fields are left alone.
// Returns how many fields it rewrote.
int MakeStringsValidUtf8(google::protobuf::Message* m);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_GRPC_VALID_UTF8_H_
