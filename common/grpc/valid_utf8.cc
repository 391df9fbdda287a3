#include "common/grpc/valid_utf8.h"

#include <cstdint>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include "absl/strings/str_format.h"

namespace gradsync {
namespace {

// Length of the well-formed UTF-8 sequence at text[i], or 0 (RFC 3629).
size_t SequenceAt(absl::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

}  // namespace

bool IsValidUtf8(absl::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = SequenceAt(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string ValidUtf8(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = SequenceAt(text, i);
    if (n == 0) {
      out += absl::StrFormat("\\x%02x", static_cast<uint8_t>(text[i]));
      ++i;
    } else {
      out.append(text.data() + i, n);
      i += n;
    }
  }
  return out;
}

int MakeStringsValidUtf8(google::protobuf::Message* m) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = m->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*m, &fields);
  int rewritten = 0;
  for (const FieldDescriptor* f : fields) {
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*m, f); ++i) {
          rewritten += MakeStringsValidUtf8(r->MutableRepeatedMessage(m, f, i));
        }
      } else {
        rewritten += MakeStringsValidUtf8(r->MutableMessage(m, f));
      }
      continue;
    }
    if (f->type() != FieldDescriptor::TYPE_STRING) continue;  // bytes stay bytes
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(*m, f); ++i) {
        const std::string s = r->GetRepeatedString(*m, f, i);
        if (!IsValidUtf8(s)) {
          r->SetRepeatedString(m, f, i, ValidUtf8(s));
          ++rewritten;
        }
      }
    } else {
      const std::string s = r->GetString(*m, f);
      if (!IsValidUtf8(s)) {
        r->SetString(m, f, ValidUtf8(s));
        ++rewritten;
      }
    }
  }
  return rewritten;
}

}  // namespace gradsync
