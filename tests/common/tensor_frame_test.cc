// TensorFrame zero-copy encoding round trips, including split slices.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "common/grpc/tensor_frame.h"

namespace gradsync {
namespace {

// Re-cuts a buffer's bytes into slices of `piece` bytes (as the network may).
grpc::ByteBuffer Recut(const grpc::ByteBuffer& in, size_t piece) {
  grpc::Slice single;
  EXPECT_TRUE(in.DumpToSingleSlice(&single).ok());
  std::vector<grpc::Slice> slices;
  for (size_t b = 0; b < single.size(); b += piece) {
    slices.emplace_back(single.begin() + b, std::min(piece, single.size() - b));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

TEST(TensorFrame, RoundTripsAcrossOddSliceBoundaries) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}}) {
    std::vector<float> data(n);
    for (size_t i = 0; i < n; ++i) data[i] = 0.5f * i - 3;
    bool released = false;
    TensorHeader h;
    h.set_job_id("j-1");
    h.set_step(42);
    h.set_rank(3);
    {
      grpc::ByteBuffer buf =
          EncodeFrame(h, data.data(), n, [&released] { released = true; });
      for (size_t piece : {size_t{1}, size_t{3}, size_t{5}, size_t{4096}}) {
        auto f = DecodedFrame::Parse(Recut(buf, piece));
        ASSERT_TRUE(f.ok()) << f.status();
        EXPECT_EQ(f->header().job_id(), "j-1");
        EXPECT_EQ(f->header().step(), 42);
        ASSERT_EQ(f->count(), n);
        std::vector<float> out(n, -1), acc(n, 1);
        f->CopyTo(out.data());
        f->AddTo(acc.data());
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(out[i], data[i]);
          ASSERT_EQ(acc[i], data[i] + 1);
        }
      }
      // Standard protobuf parses our encoding too.
      grpc::Slice single;
      ASSERT_TRUE(buf.DumpToSingleSlice(&single).ok());
      v1::TensorFrame pb;
      ASSERT_TRUE(pb.ParseFromArray(single.begin(), single.size()));
      EXPECT_EQ(pb.data().size(), n * 4);
    }
    EXPECT_TRUE(released || n == 0);
  }
}

TEST(TensorFrame, SumToAndReframeWorkAcrossOddSliceBoundaries) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}}) {
    std::vector<float> data(n), local(n);
    for (size_t i = 0; i < n; ++i) {
      data[i] = 0.25f * i + 1;
      local[i] = 3.0f - i;
    }
    TensorHeader h;
    h.set_job_id("j-2");
    h.set_step(7);
    grpc::ByteBuffer buf = EncodeFrame(h, data.data(), n, nullptr);
    for (size_t piece : {size_t{1}, size_t{3}, size_t{5}, size_t{4096}}) {
      auto f = DecodedFrame::Parse(Recut(buf, piece));
      ASSERT_TRUE(f.ok()) << f.status();
      std::vector<float> out(n, -1), inout = local;
      f->SumTo(inout.data(), out.data(), inout.data());
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(out[i], local[i] + data[i]);
        ASSERT_EQ(inout[i], local[i] + data[i]);
      }
      // Forwarding under a new header keeps the data and changes the tag.
      TensorHeader h2;
      h2.set_job_id("j-2");
      h2.set_step(8);
      h2.set_segment(5);
      auto g = DecodedFrame::Parse(Recut(f->Reframe(h2), piece));
      ASSERT_TRUE(g.ok()) << g.status();
      EXPECT_EQ(g->header().step(), 8);
      EXPECT_EQ(g->header().segment(), 5);
      ASSERT_EQ(g->count(), n);
      std::vector<float> copy(n, -1);
      g->CopyTo(copy.data());
      ASSERT_EQ(copy, data);
    }
  }
}

// Raw frame bytes: field 1 (header) with a declared length, then optionally
// field 2 (data) with a declared length, and `actual` bytes of payload.
grpc::ByteBuffer RawFrame(const std::string& header_bytes, uint64_t header_len,
                          bool with_data, uint64_t data_len, size_t actual) {
  auto varint = [](uint64_t v) {
    std::string out;
    while (v >= 0x80) {
      out.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    out.push_back(static_cast<char>(v));
    return out;
  };
  std::string bytes = "\x0a" + varint(header_len) + header_bytes;
  if (with_data) bytes += "\x12" + varint(data_len) + std::string(actual, '\0');
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

TEST(TensorFrame, HostileLengthsAreRefusedWithoutAllocating) {
  TensorHeader h;
  h.set_job_id("j-1");
  const std::string hb = h.SerializeAsString();
  // A header that claims 2^62 bytes.
  auto f = DecodedFrame::Parse(RawFrame(hb, uint64_t{1} << 62, false, 0, 0));
  EXPECT_FALSE(f.ok());
  // A count of 2^62 floats with no data: count * 4 wraps to 0.
  h.set_count(uint64_t{1} << 62);
  f = DecodedFrame::Parse(
      RawFrame(h.SerializeAsString(), h.SerializeAsString().size(), false, 0, 0));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  // ... or with a data field that declares more than arrived.
  h.set_count(4);
  f = DecodedFrame::Parse(RawFrame(h.SerializeAsString(), h.SerializeAsString().size(),
                                   true, uint64_t{1} << 62, 16));
  EXPECT_FALSE(f.ok());
  // The honest version of the last one parses.
  f = DecodedFrame::Parse(
      RawFrame(h.SerializeAsString(), h.SerializeAsString().size(), true, 16, 16));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->count(), 4u);
}

TEST(TensorFrame, ParsesAForeignEncodingAndRejectsBadLengths) {
  v1::TensorFrame pb;
  pb.mutable_header()->set_count(2);
  float two[2] = {1.5f, -2.5f};
  pb.set_data(std::string(reinterpret_cast<char*>(two), 8));
  std::string bytes;
  // Fields written data-first to take the fallback path.
  v1::TensorFrame data_only;
  data_only.set_data(pb.data());
  v1::TensorFrame header_only;
  *header_only.mutable_header() = pb.header();
  bytes = data_only.SerializeAsString() + header_only.SerializeAsString();
  grpc::Slice s(bytes);
  auto f = DecodedFrame::Parse(grpc::ByteBuffer(&s, 1));
  ASSERT_TRUE(f.ok()) << f.status();
  std::vector<float> out(2);
  f->CopyTo(out.data());
  EXPECT_EQ(out[1], -2.5f);

  pb.mutable_header()->set_count(3);  // says 3 floats, carries 2
  std::string bad = pb.SerializeAsString();
  grpc::Slice b(bad);
  auto g = DecodedFrame::Parse(grpc::ByteBuffer(&b, 1));
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);

  std::string junk = "\xff\xff\xff";
  grpc::Slice j(junk);
  EXPECT_FALSE(DecodedFrame::Parse(grpc::ByteBuffer(&j, 1)).ok());
}

}  // namespace
}  // namespace gradsync
