// The job-scoped data plane on the server side (issue 9): job keys and
// secrets, who the PS shard lets in (PsAccess), that the secret travels only
// in assignments and shard EndJobs, that reports from a worker not assigned
// the rank are ignored, and that a PS job whose ranks end with different
// parameters fails naming them.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/grpc/job_secret.h"
#include "server/coordinator/job_table.h"
#include "server/coordinator/worker_registry.h"
#include "server/ps/ps_access.h"
#include "tests/server/job_table_test_util.h"

namespace gradsync {
namespace {

std::shared_ptr<const JobKey> NewKey() {
  absl::StatusOr<JobKey> k = JobKey::Generate();
  EXPECT_TRUE(k.ok()) << k.status();
  return std::make_shared<const JobKey>(*std::move(k));
}

TEST(JobKey, SecretsDependOnKeyJobAndWorld) {
  auto a = NewKey(), b = NewKey();
  const std::string s = a->SecretOf("j-1", 2);
  EXPECT_EQ(s.size(), 64u);  // 256 bits, hex
  EXPECT_EQ(s, a->SecretOf("j-1", 2));
  EXPECT_NE(s, a->SecretOf("j-2", 2));
  EXPECT_NE(s, a->SecretOf("j-1", 3));
  EXPECT_NE(s, b->SecretOf("j-1", 2));
  EXPECT_TRUE(a->Verify("j-1", 2, s));
  EXPECT_FALSE(a->Verify("j-1", 3, s));
  EXPECT_FALSE(a->Verify("j-1", 2, ""));
  EXPECT_FALSE(b->Verify("j-1", 2, s));
}

TEST(JobKey, KeyFilesRoundTripAndShortOnesAreRefused) {
  const std::string path = ::testing::TempDir() + "/job_secret_test.key";
  ASSERT_TRUE(JobKey::WriteNewFile(path).ok());
  absl::StatusOr<JobKey> k1 = JobKey::ReadFile(path);
  absl::StatusOr<JobKey> k2 = JobKey::ReadFile(path);
  ASSERT_TRUE(k1.ok() && k2.ok()) << k1.status();
  EXPECT_EQ(k1->SecretOf("j", 1), k2->SecretOf("j", 1));
  ASSERT_TRUE(JobKey::WriteNewFile(path).ok());  // a new key
  EXPECT_NE(JobKey::ReadFile(path)->SecretOf("j", 1), k1->SecretOf("j", 1));
  FILE* f = fopen(path.c_str(), "w");
  fputs("abcd\n", f);
  fclose(f);
  EXPECT_EQ(JobKey::ReadFile(path).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(JobKey::ReadFile(path + ".none").status().code(),
            absl::StatusCode::kNotFound);
}

// Call metadata over `values` (which must outlive it).
CallMetadata Md(const std::map<std::string, std::string>& values) {
  CallMetadata md;
  for (const auto& [k, v] : values) md.emplace(k, v);
  return md;
}

TEST(PsAccess, OnlyTheJobsSecretAndRanksGetIn) {
  auto key = NewKey();
  const PsAccess access(key);
  const std::map<std::string, std::string> member = {
      {kJobWorldMetadata, "2"}, {kJobSecretMetadata, key->SecretOf("j-1", 2)}};
  int world = 0;
  EXPECT_TRUE(access.CheckMember(Md(member), "j-1/p3", 1, &world).ok());
  EXPECT_EQ(world, 2);
  EXPECT_TRUE(access.CheckJob(Md(member), "j-1").ok());
  auto denied = [](const absl::Status& st) { return absl::IsPermissionDenied(st); };
  EXPECT_TRUE(denied(access.CheckMember(Md(member), "j-1/p0", 2)));  // rank
  EXPECT_TRUE(denied(access.CheckMember(Md(member), "j-1/p0", -1)));
  EXPECT_TRUE(denied(access.CheckMember(Md(member), "j-2/p0", 0)));  // job
  EXPECT_TRUE(denied(access.CheckMember(Md({}), "j-1/p0", 0)));      // none
  std::map<std::string, std::string> forged = member;
  forged[kJobWorldMetadata] = "100";  // claims more ranks than the job has
  EXPECT_TRUE(denied(access.CheckMember(Md(forged), "j-1/p0", 50)));
  forged = member;
  forged[kJobSecretMetadata] = NewKey()->SecretOf("j-1", 2);
  EXPECT_TRUE(denied(access.CheckMember(Md(forged), "j-1/p0", 0)));
  // The old job's credential opens its checkpoints, not the member's.
  const std::map<std::string, std::string> resume = {
      {kResumeWorldMetadata, "3"}, {kResumeSecretMetadata, key->SecretOf("j-0", 3)}};
  EXPECT_TRUE(access.CheckResume(Md(resume), "j-0").ok());
  EXPECT_TRUE(denied(access.CheckResume(Md(member), "j-0")));
  EXPECT_TRUE(denied(access.CheckResume(Md(resume), "j-1")));
  // A shard without a key lets nobody in.
  EXPECT_TRUE(denied(PsAccess(nullptr).CheckMember(Md(member), "j-1/p0", 0)));
}

// A JobTable with a known key and two or three workers.
class JobSecretTable : public ::testing::Test {
 protected:
  JobSecretTable() : key_(NewKey()), table_(TableOptions(key_), &workers_, &env_) {}

  static JobTableOptions TableOptions(std::shared_ptr<const JobKey> key) {
    JobTableOptions o;
    o.ps_addresses = {"ps0:1"};
    o.id_prefix = "s-";
    o.job_key = std::move(key);
    return o;
  }

  // Registers `n` workers "w0".. and submits `spec`; returns the decisions.
  std::string Start(const v1::JobSpec& spec, Decisions* d) {
    for (int i = 0; i < spec.workers(); ++i) {
      const std::string w = "w" + std::to_string(i);
      EXPECT_TRUE(workers_.Register(w, w + ":7000", 0, env_.Now()).ok());
    }
    absl::StatusOr<v1::Job> job = table_.Submit(spec, d);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->id() : "";
  }

  void Report(const std::string& worker, const v1::WorkerMessage::JobDone& done) {
    Decisions d;
    table_.HandleJobDone(worker, done, &d);
  }

  v1::JobState State(const std::string& id) { return table_.Find(id)->state(); }

  std::shared_ptr<const JobKey> key_;
  FakeEnv env_;
  WorkerRegistry workers_;
  JobTable table_;
};

TEST_F(JobSecretTable, TheSecretIsInAssignmentsAndShardEndJobsOnly) {
  Decisions d;
  v1::JobSpec spec = Spec(v1::STRATEGY_PS, 2);
  const std::string id = Start(spec, &d);
  const std::string secret = key_->SecretOf(id, 2);
  ASSERT_EQ(d.sends.size(), 2u);
  for (const WorkerSend& s : d.sends) {
    EXPECT_EQ(s.message.assignment().job_secret(), secret);
  }
  Report("w0", Done(id, 0));
  Decisions end;
  table_.HandleJobDone("w1", Done(id, 1), &end);
  EXPECT_EQ(State(id), v1::SUCCEEDED);
  ASSERT_EQ(end.shard_end_jobs.size(), 1u);
  EXPECT_EQ(end.shard_end_jobs[0].secret, secret);
  EXPECT_EQ(end.shard_end_jobs[0].world, 2);
  // Not in the job, its listing or its events.
  EXPECT_EQ(table_.Find(id)->SerializeAsString().find(secret), std::string::npos);
  WatchCursor cursor;
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(table_.ReadEvents(id, &cursor, &events).ok());
  ASSERT_FALSE(events.empty());
  for (const v1::JobEvent& e : events) {
    EXPECT_EQ(e.SerializeAsString().find(secret), std::string::npos);
  }
}

TEST_F(JobSecretTable, AFakeWorkersReportsAreIgnored) {
  Decisions d;
  const std::string id = Start(Spec(v1::STRATEGY_PS, 2), &d);
  ASSERT_TRUE(workers_.Register("evil", "evil:7000", 0, env_.Now()).ok());
  // A second session cannot take a live worker's id.
  EXPECT_EQ(workers_.Register("w0", "evil:7000", 0, env_.Now()).code(),
            absl::StatusCode::kAlreadyExists);
  Report("evil", Done(id, 0));
  Report("evil", Done(id, 1));
  EXPECT_EQ(State(id), v1::RUNNING);
  v1::WorkerMessage::JobDone failed = Done(id, 0, absl::InternalError("x"));
  Report("evil", failed);
  EXPECT_EQ(State(id), v1::RUNNING);
  Report("w0", Done(id, 0));
  Report("w1", Done(id, 1));
  EXPECT_EQ(State(id), v1::SUCCEEDED);
}

TEST_F(JobSecretTable, PsRanksThatEndWithDifferentParametersFailTheJob) {
  for (v1::SyncMode mode : {v1::SYNC_MODE_SYNC, v1::SYNC_MODE_ASYNC}) {
    Decisions d;
    v1::JobSpec spec = Spec(v1::STRATEGY_PS, 3);
    spec.set_mode(mode);
    const std::string id = Start(spec, &d);
    v1::WorkerMessage::JobDone odd = Done(id, 2);
    odd.set_param_checksum("beef");
    Report("w0", Done(id, 0));
    Report("w1", Done(id, 1));
    Report("w2", odd);
    const v1::Job& job = *table_.Find(id);
    EXPECT_EQ(job.state(), v1::FAILED);
    EXPECT_EQ(job.error_code(), static_cast<int>(absl::StatusCode::kDataLoss));
    EXPECT_EQ(job.error(),
              "PS ranks ended with different parameters: rank 0 has c0ffee, "
              "rank 2 has beef");
    workers_ = WorkerRegistry();  // fresh workers for the next mode
  }
}

}  // namespace
}  // namespace gradsync
