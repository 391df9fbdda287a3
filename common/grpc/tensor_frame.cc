#include "common/grpc/tensor_frame.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/kernels.h"

namespace gradsync {
namespace {

constexpr uint8_t kHeaderTag = (1 << 3) | 2;  // field 1, length-delimited
constexpr uint8_t kDataTag = (2 << 3) | 2;    // field 2, length-delimited

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

std::string Prefix(const TensorHeader& header, size_t data_bytes, bool with_data) {
  std::string h = header.SerializeAsString();
  std::string out;
  out.reserve(h.size() + 24);
  out.push_back(static_cast<char>(kHeaderTag));
  PutVarint(h.size(), &out);
  out += h;
  if (with_data) {
    out.push_back(static_cast<char>(kDataTag));
    PutVarint(data_bytes, &out);
  }
  return out;
}

struct ReleaseBox {
  std::function<void()> fn;
};

void RunRelease(void* user) {
  auto* box = static_cast<ReleaseBox*>(user);
  if (box->fn) box->fn();
  delete box;
}

// Reads bytes sequentially across slices.
class Cursor {
 public:
  explicit Cursor(const std::vector<grpc::Slice>& slices) : slices_(slices) { Skip(); }
  bool Done() const { return slice_ >= slices_.size(); }
  bool Byte(uint8_t* b) {
    if (Done()) return false;
    *b = slices_[slice_].begin()[offset_];
    Advance(1);
    return true;
  }
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!Byte(&b)) return false;
      *v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  // Bytes left from the cursor on.
  uint64_t Remaining() const {
    uint64_t left = 0;
    for (size_t i = slice_; i < slices_.size(); ++i) left += slices_[i].size();
    return left - offset_;
  }
  // Fails (without allocating) when fewer than n bytes are left: a declared
  // length is never trusted before it is checked against what arrived.
  bool Bytes(uint64_t n, std::string* out) {
    out->clear();
    if (n > Remaining()) return false;
    out->reserve(n);
    while (n > 0) {
      if (Done()) return false;
      const size_t take = std::min(n, slices_[slice_].size() - offset_);
      out->append(reinterpret_cast<const char*>(slices_[slice_].begin()) + offset_, take);
      Advance(take);
      n -= take;
    }
    return true;
  }
  size_t slice() const { return slice_; }
  size_t offset() const { return offset_; }

 private:
  void Advance(size_t n) {
    offset_ += n;
    Skip();
  }
  void Skip() {
    while (slice_ < slices_.size() && offset_ >= slices_[slice_].size()) {
      offset_ -= slices_[slice_].size();
      ++slice_;
    }
  }
  const std::vector<grpc::Slice>& slices_;
  size_t slice_ = 0;
  size_t offset_ = 0;
};

}  // namespace

grpc::ByteBuffer EncodeFrameBytes(TensorHeader header, WireDtype dtype, const void* bytes,
                                  size_t n, std::function<void()> on_release) {
  header.set_count(n);
  header.set_dtype(WireDtypeToProto(dtype));
  const size_t nbytes = n * WireBytes(dtype);
  std::string prefix = Prefix(header, nbytes, n > 0);
  std::vector<grpc::Slice> slices;
  slices.emplace_back(prefix);
  if (n > 0) {
    auto* box = new ReleaseBox{std::move(on_release)};
    slices.emplace_back(const_cast<void*>(bytes), nbytes, &RunRelease, box);
  } else if (on_release) {
    on_release();
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

grpc::ByteBuffer EncodeFrame(TensorHeader header, const float* data, size_t n,
                             std::function<void()> on_release) {
  return EncodeFrameBytes(std::move(header), WireDtype::kFp32, data, n,
                          std::move(on_release));
}

grpc::ByteBuffer EncodeFrameAs(TensorHeader header, WireDtype dtype, const float* data,
                               size_t n) {
  auto owned = std::make_shared<std::vector<char>>(n * WireBytes(dtype));
  EncodeWire(dtype, data, owned->data(), n);
  const char* bytes = owned->data();
  return EncodeFrameBytes(std::move(header), dtype, bytes, n,
                          [owned = std::move(owned)]() mutable { owned.reset(); });
}

grpc::ByteBuffer EncodeFrameShared(TensorHeader header,
                                   std::shared_ptr<const std::vector<float>> owner,
                                   size_t offset, size_t n) {
  const float* data = owner->data() + offset;
  return EncodeFrame(std::move(header), data, n,
                     [owner = std::move(owner)]() mutable { owner.reset(); });
}

grpc::ByteBuffer EncodeHeaderOnly(TensorHeader header) {
  return EncodeFrame(std::move(header), nullptr, 0, nullptr);
}

absl::StatusOr<DecodedFrame> DecodedFrame::Parse(const grpc::ByteBuffer& buffer) {
  DecodedFrame f;
  grpc::Status dumped = buffer.Dump(&f.slices_);
  if (!dumped.ok()) {
    return absl::InvalidArgumentError("cannot read tensor frame bytes");
  }
  Cursor cur(f.slices_);
  bool have_header = false;
  bool have_data = false;
  uint64_t data_bytes = 0;
  // Fast path: header first, then data, as EncodeFrame writes them.
  uint8_t tag;
  if (cur.Byte(&tag) && tag == kHeaderTag) {
    uint64_t len;
    std::string h;
    if (cur.Varint(&len) && cur.Bytes(len, &h) && f.header_.ParseFromString(h)) {
      have_header = true;
      if (cur.Done()) {
        data_bytes = 0;
      } else if (cur.Byte(&tag) && tag == kDataTag && cur.Varint(&data_bytes)) {
        have_data = true;
        f.first_slice_ = cur.slice();
        f.first_offset_ = cur.offset();
        // Data must end the frame.
        size_t remaining = 0;
        for (size_t i = f.first_slice_; i < f.slices_.size(); ++i) {
          remaining += f.slices_[i].size();
        }
        remaining -= f.first_offset_;
        if (remaining != data_bytes) have_header = false;
      } else {
        have_header = false;
      }
    }
  }
  if (!have_header) {
    // Any other valid encoding (fields reordered, foreign client): copy.
    grpc::Slice single;
    if (!buffer.DumpToSingleSlice(&single).ok()) {
      return absl::InvalidArgumentError("cannot read tensor frame bytes");
    }
    v1::TensorFrame frame;
    if (!frame.ParseFromArray(single.begin(), static_cast<int>(single.size()))) {
      return absl::InvalidArgumentError("malformed tensor frame");
    }
    f.header_ = frame.header();
    f.fallback_ = std::move(*frame.mutable_data());
    f.use_fallback_ = true;
    f.slices_.clear();
    data_bytes = f.fallback_.size();
    have_data = data_bytes > 0;
  }
  absl::StatusOr<WireDtype> dtype = WireDtypeOf(f.header_.dtype());
  if (!dtype.ok()) return dtype.status();
  f.dtype_ = *dtype;
  // count * b must not wrap: a count of 2^62 would otherwise match 0 bytes.
  const size_t elem = WireBytes(f.dtype_);
  if (f.header_.count() > data_bytes / elem || data_bytes != f.header_.count() * elem) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor frame carries ", data_bytes, " bytes but its header says ",
                     f.header_.count(), " ", WireDtypeName(f.dtype_), " elements"));
  }
  (void)have_data;
  return f;
}

void DecodedFrame::ForEachPiece(
    const std::function<void(size_t, const char*, size_t)>& fn) const {
  const size_t elem = WireBytes(dtype_);
  const size_t total = data_bytes();
  if (total == 0) return;
  if (use_fallback_) {
    fn(0, fallback_.data(), total);
    return;
  }
  size_t done = 0;  // bytes delivered
  char carry[sizeof(float)];
  size_t carry_len = 0;
  for (size_t i = first_slice_; i < slices_.size() && done < total; ++i) {
    const char* p = reinterpret_cast<const char*>(slices_[i].begin());
    size_t len = slices_[i].size();
    if (i == first_slice_) {
      p += first_offset_;
      len -= first_offset_;
    }
    if (carry_len > 0) {
      const size_t take = std::min(len, elem - carry_len);
      std::memcpy(carry + carry_len, p, take);
      carry_len += take;
      p += take;
      len -= take;
      if (carry_len < elem) continue;
      fn(done / elem, carry, elem);
      done += elem;
      carry_len = 0;
    }
    const size_t whole = len - len % elem;
    if (whole > 0) {
      fn(done / elem, p, whole);
      done += whole;
    }
    carry_len = len - whole;
    std::memcpy(carry, p + whole, carry_len);
  }
}

void DecodedFrame::CopyTo(float* dst) const {
  const WireDtype d = dtype_;
  const size_t elem = WireBytes(d);
  ForEachPiece([dst, d, elem](size_t at, const char* bytes, size_t n) {
    DecodeWire(d, bytes, dst + at, n / elem);
  });
}

void DecodedFrame::SumTo(const float* a, float* out, float* out2) const {
  const WireDtype d = dtype_;
  const size_t elem = WireBytes(d);
  ForEachPiece([=](size_t at, const char* bytes, size_t n) {
    DecodeSumWire(d, out + at, out2 == nullptr ? nullptr : out2 + at, a + at, bytes,
                  n / elem);
  });
}

grpc::ByteBuffer DecodedFrame::Reframe(TensorHeader header) const {
  const size_t n = count();
  header.set_count(n);
  header.set_dtype(WireDtypeToProto(dtype_));
  const size_t bytes = data_bytes();
  std::vector<grpc::Slice> out;
  out.emplace_back(Prefix(header, bytes, n > 0));
  if (use_fallback_) {
    if (n > 0) out.emplace_back(fallback_.data(), bytes);  // copies
  } else {
    size_t left = bytes;
    for (size_t i = first_slice_; i < slices_.size() && left > 0; ++i) {
      const size_t skip = i == first_slice_ ? first_offset_ : 0;
      const size_t take = std::min(left, slices_[i].size() - skip);
      out.push_back(slices_[i].sub(skip, skip + take));  // a new reference
      left -= take;
    }
  }
  return grpc::ByteBuffer(out.data(), out.size());
}

void DecodedFrame::AddTo(float* dst) const {
  const WireDtype d = dtype_;
  const size_t elem = WireBytes(d);
  ForEachPiece([dst, d, elem](size_t at, const char* bytes, size_t n) {
    DecodeAddWire(d, dst + at, bytes, n / elem);
  });
}

}  // namespace gradsync
