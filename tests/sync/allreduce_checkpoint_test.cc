// Allreduce checkpoints end to end in one process: AllreduceCheckpointClient (worker)
// against a PsService over a store with a checkpoint root (PS shard 0):
// pieces saved and loaded back bit for bit, the newest complete checkpoint
// found while a newer one is cut off half-way, the last two kept, a
// damaged piece refused naming its file.
#include "worker/sync/allreduce_checkpoint.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "common/grpc/grpc_util.h"
#include "server/ps/allreduce_checkpoints.h"
#include "server/ps/ps_access.h"
#include "server/ps/ps_service.h"

namespace gradsync {
namespace {

// Two and a bit pieces, so the last one is short.
constexpr size_t kN = 2 * kAllreduceCheckpointPieceFloats + 3;

AllreduceState AdamState(float base) {
  AllreduceState s;
  s.params.resize(kN);
  std::iota(s.params.begin(), s.params.end(), base);
  s.optimizer.steps = 17;
  s.optimizer.first.assign(kN, base + 0.5f);
  s.optimizer.second.assign(kN, base + 0.25f);
  return s;
}

class AllreduceCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gradsync-ring-ckpt-XXXXXX";
    root_ = mkdtemp(tmpl);
    store_ = std::make_unique<PsStore>(root_);
    service_ = std::make_unique<PsService>(store_.get(), &access_);
    auto started = StartServer("127.0.0.1:0", {service_.get()});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(started->server);
    address_ = LocalAddress("127.0.0.1:0", started->port);
  }
  // A client with `job`'s credentials (world 1), as saving and as resuming
  // from it; `secret` overrides the secret (an outsider's).
  AllreduceCheckpointClient* C(const std::string& job, std::string secret = "") {
    if (secret.empty()) secret = key_->SecretOf(job, 1);
    auto& c = clients_[job + "/" + secret];
    if (c == nullptr) {
      c = std::make_unique<AllreduceCheckpointClient>(
          address_, PsCredentials{secret, 1, secret, 1});
    }
    return c.get();
  }
  void TearDown() override {
    server_->Shutdown(ToChrono(absl::Now() + absl::Seconds(1)));
    std::filesystem::remove_all(root_);
  }
  absl::Time Deadline() const { return absl::Now() + absl::Seconds(30); }

  std::string root_;
  std::unique_ptr<PsStore> store_;
  std::unique_ptr<PsService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<const JobKey> key_ =
      std::make_shared<const JobKey>(*JobKey::Generate());
  PsAccess access_{key_};
  std::string address_;
  std::map<std::string, std::unique_ptr<AllreduceCheckpointClient>> clients_;
};

TEST(AllreduceCheckpointPieces, CoverTheVectorInOrder) {
  const std::vector<Range> p = AllreduceCheckpointPieces(kN);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[2].begin, 2 * kAllreduceCheckpointPieceFloats);
  EXPECT_EQ(p[2].size, 3u);
  EXPECT_EQ(AllreduceCheckpointPieces(0).size(), 1u);
}

TEST_F(AllreduceCheckpointTest, SavedStateLoadsBackBitForBit) {
  const AllreduceState saved = AdamState(1.0f);
  ASSERT_TRUE(C("j-1")->Save("j-1", 4, saved, Deadline()).ok());
  absl::StatusOr<int64_t> step = C("j-1")->NewestStep("j-1", Deadline());
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 4);
  AllreduceState loaded;
  loaded.params.resize(kN);
  absl::Status st = C("j-1")->Load("j-1", 4, &loaded, Deadline());
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(loaded.params, saved.params);
  EXPECT_EQ(loaded.optimizer.steps, 17);
  EXPECT_EQ(loaded.optimizer.first, saved.optimizer.first);
  EXPECT_EQ(loaded.optimizer.second, saved.optimizer.second);

  // Plain SGD: no moments at all.
  AllreduceState sgd;
  sgd.params = saved.params;
  ASSERT_TRUE(C("j-2")->Save("j-2", 1, sgd, Deadline()).ok());
  loaded.params.assign(kN, 0.0f);
  ASSERT_TRUE(C("j-2")->Load("j-2", 1, &loaded, Deadline()).ok());
  EXPECT_EQ(loaded.params, sgd.params);
  EXPECT_TRUE(loaded.optimizer.first.empty());
  EXPECT_TRUE(loaded.optimizer.second.empty());
}

TEST_F(AllreduceCheckpointTest, NewestCompleteCheckpointWinsAndTwoAreKept) {
  ASSERT_TRUE(C("j-1")->Save("j-1", 4, AdamState(1.0f), Deadline()).ok());
  ASSERT_TRUE(C("j-1")->Save("j-1", 8, AdamState(2.0f), Deadline()).ok());
  // Step 12 cut off after its first piece (rank 0 died).
  const AllreduceState s12 = AdamState(3.0f);
  CheckpointView piece;
  piece.params = absl::MakeConstSpan(s12.params).subspan(0, 10);
  ASSERT_TRUE(SaveAllreduceCheckpointPiece(root_, "j-1", 12, 0, piece).ok());
  absl::StatusOr<int64_t> step = C("j-1")->NewestStep("j-1", Deadline());
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 8);
  // Piece 0 keeps steps 8 and 12 only; the others 4 and 8.
  const auto listing = ListCheckpoints(root_ + "/j-1");
  EXPECT_EQ(listing.at("r0"), std::set<int64_t>({8, 12}));
  EXPECT_EQ(listing.at("r2"), std::set<int64_t>({4, 8}));
}

TEST_F(AllreduceCheckpointTest, DamagedMissingOrMismatchedCheckpointsAreRefused) {
  ASSERT_TRUE(C("j-1")->Save("j-1", 4, AdamState(1.0f), Deadline()).ok());
  AllreduceState loaded;
  loaded.params.resize(kN - 1);  // another model
  EXPECT_TRUE(absl::IsFailedPrecondition(C("j-1")->Load("j-1", 4, &loaded, Deadline())));
  loaded.params.resize(kN);
  EXPECT_TRUE(absl::IsNotFound(C("j-1")->Load("j-1", 5, &loaded, Deadline())));
  absl::StatusOr<int64_t> none = C("j-9")->NewestStep("j-9", Deadline());
  EXPECT_TRUE(absl::IsNotFound(none.status()));
  EXPECT_NE(none.status().message().find("j-9"), std::string::npos);

  const std::string path = CheckpointFile(root_ + "/j-1", "r1", 4);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    f.put('\x5a');
  }
  absl::Status st = C("j-1")->Load("j-1", 4, &loaded, Deadline());
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_NE(st.message().find(path), std::string::npos) << st;
}

// Without the job's secret nobody saves into, lists or reads its checkpoint.
TEST_F(AllreduceCheckpointTest, OutsidersCannotSaveListOrLoad) {
  ASSERT_TRUE(C("j-1")->Save("j-1", 4, AdamState(1.0f), Deadline()).ok());
  AllreduceCheckpointClient* outsider = C("j-1", std::string(64, 'f'));
  EXPECT_EQ(outsider->Save("j-1", 8, AdamState(2.0f), Deadline()).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(outsider->NewestStep("j-1", Deadline()).status().code(),
            absl::StatusCode::kPermissionDenied);
  AllreduceState loaded;
  loaded.params.resize(kN);
  EXPECT_EQ(outsider->Load("j-1", 4, &loaded, Deadline()).code(),
            absl::StatusCode::kPermissionDenied);
  // A member of another job is an outsider here too.
  EXPECT_EQ(C("j-2")->Load("j-1", 4, &loaded, Deadline()).code(),
            absl::StatusCode::kPermissionDenied);
  absl::StatusOr<int64_t> step = C("j-1")->NewestStep("j-1", Deadline());
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 4);  // the refused save left nothing
}

TEST(AllreduceCheckpointStore, NoStateDirectoryOrBadJobIsRefused) {
  CheckpointView v;
  EXPECT_TRUE(
      absl::IsFailedPrecondition(SaveAllreduceCheckpointPiece("", "j-1", 1, 0, v)));
  EXPECT_TRUE(
      absl::IsInvalidArgument(SaveAllreduceCheckpointPiece("/tmp", "../x", 1, 0, v)));
  EXPECT_TRUE(
      absl::IsInvalidArgument(SaveAllreduceCheckpointPiece("/tmp", "j-1", 1, -1, v)));
}

}  // namespace
}  // namespace gradsync
