// ContentStore: files appear under their SHA-256 only complete and checked;
// a mismatch, an overrun or a writer that gives up leaves nothing behind, and
// temporaries of dead processes are swept when the store is opened.
#include "common/content_store.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace gradsync {
namespace {

namespace fs = std::filesystem;

std::string FreshDir() {
  char tmpl[] = "/tmp/gradsync-content-XXXXXX";
  return mkdtemp(tmpl);
}

int Entries(const std::string& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++n;
  }
  return n;
}

TEST(ContentStore, Sha256OfKnownVectors) {
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(ContentStore, AFileWrittenInPiecesIsFoundByItsHash) {
  const std::string dir = FreshDir();
  auto store = ContentStore::Open(dir + "/blobs");
  ASSERT_TRUE(store.ok()) << store.status();
  std::string content;
  for (int i = 0; i < 100000; ++i) content.push_back(static_cast<char>(i * 7));
  const std::string hash = Sha256Hex(content);
  EXPECT_EQ((*store)->Find(hash).status().code(), absl::StatusCode::kNotFound);
  auto w = (*store)->NewWriter(1 << 20);
  ASSERT_TRUE(w.ok());
  for (size_t at = 0; at < content.size(); at += 30001) {
    ASSERT_TRUE((*w)->Append(absl::string_view(content).substr(at, 30001)).ok());
  }
  auto info = (*w)->Commit(hash, content.size());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->sha256, hash);
  EXPECT_EQ(info->size, content.size());
  auto path = (*store)->Find(hash, /*verify=*/true);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*Sha256OfFile(*path), hash);
  EXPECT_EQ(Entries(dir + "/blobs"), 1);
  EXPECT_EQ((*store)->Find("not-a-hash").status().code(),
            absl::StatusCode::kInvalidArgument);
  // An empty file is content too.
  auto empty = (*store)->NewWriter(10);
  ASSERT_TRUE(empty.ok());
  auto e = (*empty)->Commit(Sha256Hex(""), 0);
  ASSERT_TRUE(e.ok()) << e.status();
  fs::remove_all(dir);
}

TEST(ContentStore, AMismatchOrAnOverrunKeepsNothing) {
  const std::string dir = FreshDir();
  auto store = ContentStore::Open(dir);
  ASSERT_TRUE(store.ok());
  {
    auto w = (*store)->NewWriter(100);
    ASSERT_TRUE((*w)->Append("hello").ok());
    auto bad = (*w)->Commit(Sha256Hex("hellp"), 5);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  }
  {
    auto w = (*store)->NewWriter(100);
    ASSERT_TRUE((*w)->Append("hello").ok());
    EXPECT_EQ((*w)->Commit(Sha256Hex("hello"), 6).status().code(),
              absl::StatusCode::kDataLoss);  // announced 6 bytes, got 5
  }
  {
    auto w = (*store)->NewWriter(8);
    ASSERT_TRUE((*w)->Append("12345").ok());
    EXPECT_EQ((*w)->Append("6789").code(), absl::StatusCode::kResourceExhausted);
  }
  {
    auto w = (*store)->NewWriter(100);
    ASSERT_TRUE((*w)->Append("given up").ok());
  }  // destroyed without Commit
  EXPECT_EQ(Entries(dir), 0);
  fs::remove_all(dir);
}

TEST(ContentStore, AFileThatNoLongerMatchesItsNameIsRemovedOnVerify) {
  const std::string dir = FreshDir();
  auto store = ContentStore::Open(dir);
  ASSERT_TRUE(store.ok());
  auto w = (*store)->NewWriter(100);
  ASSERT_TRUE((*w)->Append("model bytes").ok());
  auto info = (*w)->Commit("", std::nullopt);
  ASSERT_TRUE(info.ok());
  std::ofstream(dir + "/" + info->sha256, std::ios::app) << "tampered";
  EXPECT_TRUE((*store)->Find(info->sha256).ok());  // unverified: still there
  EXPECT_EQ((*store)->Find(info->sha256, true).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(Entries(dir), 0);
  fs::remove_all(dir);
}

TEST(ContentStore, OpenSweepsTemporariesOfDeadProcessesOnly) {
  const std::string dir = FreshDir();
  // A pid that cannot be alive (above pid_max) and our own.
  std::ofstream(dir + "/.tmp-99999999-0") << "half";
  const std::string mine = dir + "/.tmp-" + std::to_string(getpid()) + "-77";
  std::ofstream(mine) << "being written";
  auto store = ContentStore::Open(dir);
  ASSERT_TRUE(store.ok());
  EXPECT_FALSE(fs::exists(dir + "/.tmp-99999999-0"));
  EXPECT_TRUE(fs::exists(mine));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gradsync
