// The worker registry (see worker_registry.h).
#include "server/coordinator/worker_registry.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"

namespace gradsync {

std::vector<const RegisteredWorker*> OrderByHost(
    std::vector<const RegisteredWorker*> workers) {
  std::map<std::string, size_t> host_rank;  // host -> order of first sight
  for (const RegisteredWorker* w : workers) {
    host_rank.emplace(AddressHost(w->peer_address), host_rank.size());
  }
  std::stable_sort(workers.begin(), workers.end(),
                   [&](const RegisteredWorker* a, const RegisteredWorker* b) {
                     return host_rank[AddressHost(a->peer_address)] <
                            host_rank[AddressHost(b->peer_address)];
                   });
  return workers;
}

absl::Status WorkerRegistry::Register(const std::string& id,
                                      const std::string& peer_address, int num_gpus,
                                      absl::Time now,
                                      const std::string& bulk_peer_address) {
  if (IsLive(id)) {
    return absl::AlreadyExistsError(absl::StrCat("worker id ", id, " is already joined"));
  }
  RegisteredWorker& w = workers_[id];
  w = RegisteredWorker{};
  w.id = id;
  w.peer_address = peer_address;
  w.bulk_peer_address = bulk_peer_address;
  w.num_gpus = num_gpus;
  w.order = next_order_++;
  w.last_seen = now;
  return absl::OkStatus();
}

const RegisteredWorker* WorkerRegistry::Find(const std::string& id) const {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second;
}

bool WorkerRegistry::IsLive(const std::string& id) const {
  const RegisteredWorker* w = Find(id);
  return w != nullptr && !w->dead;
}

void WorkerRegistry::Touch(const std::string& id, absl::Time now) {
  auto it = workers_.find(id);
  if (it != workers_.end() && !it->second.dead) it->second.last_seen = now;
}

const RegisteredWorker* WorkerRegistry::MarkDead(const std::string& id) {
  auto it = workers_.find(id);
  if (it == workers_.end() || it->second.dead) return nullptr;
  it->second.dead = true;
  return &it->second;
}

std::vector<std::string> WorkerRegistry::Expired(absl::Time now,
                                                 absl::Duration timeout) const {
  std::vector<std::string> expired;
  for (const auto& [id, w] : workers_) {
    if (!w.dead && now - w.last_seen > timeout) expired.push_back(id);
  }
  return expired;
}

std::vector<const RegisteredWorker*> WorkerRegistry::PickIdle(
    int n, const std::function<bool(const RegisteredWorker&)>& skip) const {
  std::vector<const RegisteredWorker*> idle;
  for (const RegisteredWorker* w : Live()) {
    if (w->job_id.empty() && (skip == nullptr || !skip(*w))) idle.push_back(w);
  }
  if (static_cast<int>(idle.size()) < n) return {};
  idle.resize(n);
  return OrderByHost(std::move(idle));
}

void WorkerRegistry::Assign(const std::string& id, const std::string& job_id) {
  auto it = workers_.find(id);
  if (it != workers_.end()) it->second.job_id = job_id;
}

void WorkerRegistry::Release(const std::string& id, const std::string& job_id) {
  auto it = workers_.find(id);
  if (it != workers_.end() && it->second.job_id == job_id) {
    it->second.job_id.clear();
  }
}

std::vector<const RegisteredWorker*> WorkerRegistry::Live() const {
  std::vector<const RegisteredWorker*> live;
  for (const auto& [id, w] : workers_) {
    if (!w.dead) live.push_back(&w);
  }
  std::sort(live.begin(), live.end(),
            [](const RegisteredWorker* a, const RegisteredWorker* b) {
              return a->order < b->order;
            });
  return live;
}

size_t WorkerRegistry::ForgetDead(absl::Time now, absl::Duration grace) {
  size_t forgotten = 0;
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->second.dead && now - it->second.last_seen > grace) {
      it = workers_.erase(it);
      ++forgotten;
    } else {
      ++it;
    }
  }
  return forgotten;
}

}  // namespace gradsync
