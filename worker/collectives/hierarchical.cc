#include "worker/collectives/hierarchical.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"

namespace gradsync {

absl::StatusOr<HostGroups> HostGroups::Make(const std::vector<int>& groups, int world) {
  if (!groups.empty() && static_cast<int>(groups.size()) != world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "groups: ", groups.size(), " group ids for a world of ", world, " ranks"));
  }
  HostGroups h;
  h.group_of.assign(world, -1);
  std::map<int, int> index_of_id;  // group id -> index into members
  for (int r = 0; r < world; ++r) {
    const int id = groups.empty() ? r : groups[r];
    if (id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("groups: rank ", r, " has group id ", id, " (want >= 0)"));
    }
    auto [it, added] = index_of_id.emplace(id, static_cast<int>(h.members.size()));
    if (added) h.members.emplace_back();  // ranks ascend: r is its leader
    h.members[it->second].push_back(r);
    h.group_of[r] = it->second;
  }
  return h;
}

std::vector<int> HostGroups::Leaders() const {
  std::vector<int> leaders;
  for (const std::vector<int>& m : members) leaders.push_back(m.front());
  return leaders;
}

std::vector<int> GroupsByHost(const std::vector<std::string>& addresses) {
  std::map<std::string, int> id_of_host;
  std::vector<int> groups;
  for (const std::string& address : addresses) {
    auto it =
        id_of_host.emplace(AddressHost(address), static_cast<int>(id_of_host.size()));
    groups.push_back(it.first->second);
  }
  return groups;
}

absl::StatusOr<std::unique_ptr<HierarchicalAllreduce>> HierarchicalAllreduce::Create(
    Transport* transport, size_t count, const AllreduceOptions& options) {
  absl::StatusOr<HostGroups> groups = HostGroups::Make(options.groups, transport->size());
  if (!groups.ok()) return groups.status();
  const int r = transport->rank();
  std::vector<int> members = groups->members[groups->group_of[r]];
  const int position =
      static_cast<int>(std::find(members.begin(), members.end(), r) - members.begin());
  std::unique_ptr<HierarchicalAllreduce> h(
      new HierarchicalAllreduce(transport, count, options, std::move(members), position));
  if (position == 0) {
    absl::StatusOr<std::unique_ptr<SubTransport>> leaders =
        SubTransport::Create(transport, groups->Leaders());
    if (!leaders.ok()) return leaders.status();
    h->leaders_ = std::move(*leaders);
    h->ring_ = std::make_unique<RingAllreduce>(
        h->leaders_.get(), count,
        RingOptions{options.segment_bytes, options.timeout, options.env});
  }
  return h;
}

HierarchicalAllreduce::HierarchicalAllreduce(Transport* transport, size_t count,
                                             const AllreduceOptions& options,
                                             std::vector<int> members, int position)
    : transport_(transport),
      count_(count),
      timeout_(options.timeout),
      env_(options.env),
      members_(std::move(members)),
      position_(position),
      segments_(Segments(Range{0, count}, SegmentElems(options.segment_bytes))) {}

absl::Status HierarchicalAllreduce::Run(float* data, int64_t step, int bucket) {
  if (transport_->size() == 1 || count_ == 0) return absl::OkStatus();
  transport_->BeginCollective(count_ * sizeof(float));
  const absl::Time deadline = env_->Now() + timeout_;
  // 1.
  absl::Status st = ReduceToLeader(data, step, bucket, deadline);
  if (!st.ok()) return st;
  // 2.
  if (ring_ != nullptr) {
    st = ring_->Run(data, step, bucket);
    if (!st.ok()) return st;
  }
  // 3.
  st = BroadcastFromLeader(data, step, bucket, env_->Now() + timeout_);
  if (!st.ok()) return st;
  // 4.
  return transport_->WaitSendsReleased(env_->Now() + timeout_);
}

absl::Status HierarchicalAllreduce::ReduceToLeader(float* data, int64_t step, int bucket,
                                                   absl::Time deadline) {
  const int g = static_cast<int>(members_.size());
  const int p = position_;
  if (g == 1) return absl::OkStatus();
  const int up = p > 0 ? members_[p - 1] : -1;        // where our sum goes
  const int down = p + 1 < g ? members_[p + 1] : -1;  // who sends to us
  for (size_t s = 0; s < segments_.size(); ++s) {
    float* own = data + segments_[s].begin;
    const size_t n = segments_[s].size;
    const ChunkTag out = MakeTag(step, bucket, CollectivePhase::kGroupReduce, p, s);
    if (down < 0) {  // the tail: nothing to add
      absl::Status st = transport_->Send(up, out, own, n);
      if (!st.ok()) return st;
      continue;
    }
    auto chunk = transport_->Recv(
        down, MakeTag(step, bucket, CollectivePhase::kGroupReduce, p + 1, s), n,
        deadline);
    if (!chunk.ok()) return chunk.status();
    // own + received, in that order, on every hop (see the class comment).
    if (up < 0) {  // the leader keeps the group's sum
      (*chunk)->AddTo(own);
      continue;
    }
    absl::Status st = transport_->SendSum(up, out, own, **chunk, /*store=*/nullptr);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status HierarchicalAllreduce::BroadcastFromLeader(float* data, int64_t step,
                                                        int bucket, absl::Time deadline) {
  const int g = static_cast<int>(members_.size());
  const int p = position_;
  if (g == 1) return absl::OkStatus();
  const int up = p > 0 ? members_[p - 1] : -1;        // who sends to us
  const int down = p + 1 < g ? members_[p + 1] : -1;  // where we pass it on
  for (size_t s = 0; s < segments_.size(); ++s) {
    float* dst = data + segments_[s].begin;
    const size_t n = segments_[s].size;
    const ChunkTag out = MakeTag(step, bucket, CollectivePhase::kGroupBroadcast, p, s);
    if (up < 0) {  // the leader
      absl::Status st = transport_->Send(down, out, dst, n);
      if (!st.ok()) return st;
      continue;
    }
    auto chunk = transport_->Recv(
        up, MakeTag(step, bucket, CollectivePhase::kGroupBroadcast, p - 1, s), n,
        deadline);
    if (!chunk.ok()) return chunk.status();
    (*chunk)->CopyTo(dst);
    if (down >= 0) {
      absl::Status st = transport_->Forward(down, out, **chunk);
      if (!st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

}  // namespace gradsync
