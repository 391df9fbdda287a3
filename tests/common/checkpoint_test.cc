// Checkpoint files: round trip, and every kind of damage refused.
#include "common/checkpoint.h"

#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

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

// An Env whose files live in a map: the checkpoint files go through the Env
// given, not around it (the PS store hands its slices its own).
class MapFileEnv final : public Env {
 public:
  absl::Time Now() const override { return Env::Default()->Now(); }
  absl::Time NowMonotonic() const override { return Env::Default()->NowMonotonic(); }
  void SleepFor(absl::Duration d) const override { Env::Default()->SleepFor(d); }
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                         absl::Time deadline) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return Env::Default()->AwaitWithDeadline(mu, cond, deadline);
  }
  absl::StatusOr<std::string> ReadFileToString(const std::string& path) const override {
    absl::MutexLock lock(&mu_);
    auto it = files_.find(path);
    if (it == files_.end()) return absl::NotFoundError(path);
    return it->second;
  }
  absl::Status WriteFileAtomically(const std::string& path,
                                   absl::string_view contents) const override {
    absl::MutexLock lock(&mu_);
    if (fail_writes_) return absl::InternalError(absl::StrCat(path, ": disk full"));
    files_[path] = std::string(contents);
    return absl::OkStatus();
  }
  absl::Status CreateDirectories(const std::string&) const override {
    return absl::OkStatus();
  }
  bool FileExists(const std::string& path) const override {
    absl::MutexLock lock(&mu_);
    return files_.count(path) > 0;
  }
  void set_fail_writes(bool fail) {
    absl::MutexLock lock(&mu_);
    fail_writes_ = fail;
  }

 private:
  mutable absl::Mutex mu_;
  mutable std::map<std::string, std::string> files_ ABSL_GUARDED_BY(mu_);
  bool fail_writes_ ABSL_GUARDED_BY(mu_) = false;
};

TEST(CheckpointEnv, FilesGoThroughTheEnvGiven) {
  MapFileEnv env;
  const std::vector<float> p = {1.0f, 2.0f}, m = {3.0f, 4.0f}, v = {5.0f, 6.0f};
  const std::string path = "/nonexistent-dir/j-1/p0-2.ckpt";
  ASSERT_TRUE(WriteCheckpoint(path, {"j-1/p0", 2, p, 7, m, v}, &env).ok());
  EXPECT_TRUE(env.FileExists(path));
  EXPECT_FALSE(std::filesystem::exists(path));  // not on the real disk
  absl::StatusOr<Checkpoint> c = ReadCheckpoint(path, &env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->key, "j-1/p0");
  EXPECT_EQ(c->step, 2);
  EXPECT_EQ(c->optimizer_steps, 7);
  EXPECT_EQ(c->params, p);
  EXPECT_EQ(c->first_moment, m);
  EXPECT_EQ(c->second_moment, v);
  // The real Env has no such file.
  EXPECT_TRUE(absl::IsNotFound(ReadCheckpoint(path).status()));

  // A failed write is the Env's error, named as a checkpoint's.
  env.set_fail_writes(true);
  absl::Status st = WriteCheckpoint(path, {"j-1/p0", 3, p, 8, m, v}, &env);
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_NE(st.message().find("checkpoint"), std::string::npos) << st;
  EXPECT_NE(st.message().find("disk full"), std::string::npos) << st;
  // The file written before is untouched.
  ASSERT_TRUE(ReadCheckpoint(path, &env).ok());
  EXPECT_EQ(ReadCheckpoint(path, &env)->step, 2);
}

}  // namespace
}  // namespace gradsync
