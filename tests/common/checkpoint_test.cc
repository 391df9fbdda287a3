// Checkpoint files: round trip, and every kind of damage refused.
#include "common/checkpoint.h"

#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gradsync {
namespace {

class CheckpointFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gradsync-ckpt-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = CheckpointFile(dir_ + "/j-1", "p0", 4);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes a small checkpoint to path_ and returns what was written.
  Checkpoint WriteSample() {
    Checkpoint c{
        "j-1/p0", 4, {1.5f, -2.0f, 3.25f}, 4, {0.5f, 0.25f, 0.0f}, {1e-3f, 2e-3f, 3e-3f}};
    CheckpointView v{c.key,          c.step,         c.params, c.optimizer_steps,
                     c.first_moment, c.second_moment};
    EXPECT_TRUE(WriteCheckpoint(path_, v).ok());
    return c;
  }
  std::string Bytes() {
    std::ifstream in(path_, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }
  void Put(const std::string& bytes) {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes;
  }

  std::string dir_, path_;
};

TEST_F(CheckpointFileTest, RoundTripsEveryField) {
  const Checkpoint c = WriteSample();
  absl::StatusOr<Checkpoint> r = ReadCheckpoint(path_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->key, c.key);
  EXPECT_EQ(r->step, 4);
  EXPECT_EQ(r->optimizer_steps, 4);
  EXPECT_EQ(r->params, c.params);
  EXPECT_EQ(r->first_moment, c.first_moment);
  EXPECT_EQ(r->second_moment, c.second_moment);
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
}

TEST_F(CheckpointFileTest, EmptyMomentsRoundTrip) {
  const std::vector<float> p = {7.0f};
  ASSERT_TRUE(WriteCheckpoint(path_, {"k", 1, p, 1, {}, {}}).ok());
  absl::StatusOr<Checkpoint> r = ReadCheckpoint(path_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->params, p);
  EXPECT_TRUE(r->first_moment.empty());
  EXPECT_TRUE(r->second_moment.empty());
}

TEST_F(CheckpointFileTest, MissingFileIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(ReadCheckpoint(path_).status()));
}

TEST_F(CheckpointFileTest, FlippedByteIsRefusedByItsChecksum) {
  WriteSample();
  std::string b = Bytes();
  b[b.size() / 2] ^= 0x10;
  Put(b);
  absl::Status st = ReadCheckpoint(path_).status();
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_NE(st.message().find(path_), std::string::npos) << st;
  EXPECT_NE(st.message().find("CRC-32"), std::string::npos) << st;
}

TEST_F(CheckpointFileTest, TruncatedFileIsRefused) {
  WriteSample();
  const std::string b = Bytes();
  for (size_t keep : {size_t{0}, size_t{10}, b.size() - 1}) {
    Put(b.substr(0, keep));
    absl::Status st = ReadCheckpoint(path_).status();
    EXPECT_TRUE(absl::IsDataLoss(st)) << keep << ": " << st;
  }
}

TEST_F(CheckpointFileTest, OtherFilesAreRefusedByTheirMagic) {
  WriteSample();
  Put(std::string(100, 'x'));
  absl::Status st = ReadCheckpoint(path_).status();
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_NE(st.message().find("magic"), std::string::npos) << st;
}

TEST_F(CheckpointFileTest, AnotherVersionIsRefused) {
  // A file written by another version (with a valid checksum of its own).
  const std::vector<float> p = {1.0f};
  ASSERT_TRUE(WriteCheckpoint(path_, {"k", 1, p, 1, {}, {}}).ok());
  std::string b = Bytes();
  b[8] = 2;  // version field
  // Recompute the trailer so that only the version differs.
  const uint32_t crc = static_cast<uint32_t>(
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(b.data()),
            static_cast<uInt>(b.size() - 4)));
  std::memcpy(&b[b.size() - 4], &crc, 4);
  Put(b);
  absl::Status st = ReadCheckpoint(path_).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_NE(st.message().find("format version 2"), std::string::npos) << st;
}

TEST(CheckpointListingTest, CommonStepsOfAllPieces) {
  char tmpl[] = "/tmp/gradsync-ckpt-list-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::vector<float> p = {1.0f};
  for (auto [piece, step] :
       {std::pair<const char*, int>{"p0", 4}, {"p0", 6}, {"p1", 4}, {"p1", 2}}) {
    ASSERT_TRUE(
        WriteCheckpoint(CheckpointFile(dir, piece, step), {"k", step, p, 0, {}, {}})
            .ok());
  }
  std::ofstream(dir + "/notes.txt") << "ignored";
  const auto listing = ListCheckpoints(dir);
  ASSERT_EQ(listing.size(), 2u);
  EXPECT_EQ(CommonSteps(listing), std::set<int64_t>({4}));
  EXPECT_TRUE(ListCheckpoints(dir + "/none").empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gradsync
