#include "worker/sync/ps_resume.h"

#include <algorithm>
#include <iterator>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "gradsync/v1/gradsync.grpc.pb.h"

namespace gradsync {

absl::StatusOr<int64_t> PickResumeStep(const std::string& old_job,
                                       const std::vector<std::vector<int64_t>>& lists,
                                       const std::vector<int>& slices) {
  std::set<int64_t> common;
  bool any = false;
  for (size_t i = 0; i < lists.size(); ++i) {
    if (slices[i] == 0) continue;
    const std::set<int64_t> mine(lists[i].begin(), lists[i].end());
    if (!any) {
      common = mine;
    } else {
      std::set<int64_t> keep;
      std::set_intersection(common.begin(), common.end(), mine.begin(), mine.end(),
                            std::inserter(keep, keep.begin()));
      common = std::move(keep);
    }
    any = true;
  }
  if (!any) {
    return absl::NotFoundError(absl::StrCat("cannot resume ", old_job,
                                            ": its PS shards hold no checkpoint of it"));
  }
  if (common.empty()) {
    return absl::NotFoundError(
        absl::StrCat("cannot resume ", old_job,
                     ": no step has a checkpoint on every slice of its PS shards"));
  }
  return *common.rbegin();
}

absl::StatusOr<v1::CheckpointsResponse> ListCheckpoints(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& address,
    const std::string& job, const PsCredentials& creds, absl::Time deadline) {
  auto stub = v1::ParameterServer::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(deadline));
  AddPsCredentials(creds, &ctx);
  v1::CheckpointsRequest req;
  req.set_job_id(job);
  v1::CheckpointsResponse resp;
  const grpc::Status st = stub->Checkpoints(&ctx, req, &resp);
  if (!st.ok()) {
    const absl::Status s = FromGrpcStatus(st);
    return absl::Status(s.code(), absl::StrCat("checkpoints of ", job, " on PS shard ",
                                               address, ": ", s.message()));
  }
  return resp;
}

absl::StatusOr<int64_t> FindResumeStep(const std::string& old_job,
                                       const std::set<std::string>& shards,
                                       const PsCredentials& creds, absl::Time deadline) {
  std::vector<std::vector<int64_t>> lists;
  std::vector<int> slices;
  for (const std::string& address : shards) {
    absl::StatusOr<v1::CheckpointsResponse> resp =
        ListCheckpoints(MakeChannel(address), address, old_job, creds, deadline);
    if (!resp.ok()) return resp.status();
    lists.emplace_back(resp->steps().begin(), resp->steps().end());
    slices.push_back(resp->slices());
  }
  return PickResumeStep(old_job, lists, slices);
}

}  // namespace gradsync
