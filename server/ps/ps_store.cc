#include "server/ps/ps_store.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace gradsync {
namespace {

// "j-3/p1" -> "j-3".
std::string JobOf(const std::string& key) { return key.substr(0, key.find('/')); }

absl::Status ShuttingDown() {
  return absl::UnavailableError("parameter server shutting down");
}

}  // namespace

absl::StatusOr<std::shared_ptr<PsSlice>> PsStore::Find(
    const std::string& key) const {
  if (shutdown_) return ShuttingDown();
  if (auto e = ended_.find(JobOf(key)); e != ended_.end()) {
    return absl::AbortedError(e->second);
  }
  auto it = slices_.find(key);
  if (it == slices_.end()) return absl::NotFoundError(key);
  return it->second;
}

absl::Status PsStore::Init(const std::string& key, const ShardJobConfig& config,
                           std::vector<float> initial) {
  absl::StatusOr<std::unique_ptr<PsSlice>> made =
      PsSlice::Create(config, std::move(initial));
  if (!made.ok()) return made.status();
  std::shared_ptr<PsSlice> part = *std::move(made);
  std::vector<Reply> waiters;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return ShuttingDown();
    if (ended_.count(JobOf(key))) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", key, " already ended on this shard"));
    }
    if (slices_.count(key)) {
      return absl::AlreadyExistsError(
          absl::StrCat("job ", key, " already initialised on this shard"));
    }
    slices_[key] = part;
    if (auto it = pull_waiters_.find(key); it != pull_waiters_.end()) {
      waiters = std::move(it->second);
      pull_waiters_.erase(it);
    }
  }
  for (Reply& r : waiters) r(part->Pull(/*initial=*/true));
  return absl::OkStatus();
}

void PsStore::Pull(const std::string& key, bool initial, Reply reply) {
  absl::StatusOr<std::shared_ptr<PsSlice>> part;
  {
    absl::MutexLock lock(&mu_);
    part = Find(key);
    if (absl::IsNotFound(part.status())) {
      pull_waiters_[key].push_back(std::move(reply));
      return;
    }
  }
  if (!part.ok()) {
    reply(part.status());
    return;
  }
  reply((*part)->Pull(initial));
}

void PsStore::Push(const std::string& key, int64_t step, int rank,
                   size_t count, absl::FunctionRef<void(float*)> accumulate,
                   Reply reply) {
  absl::StatusOr<std::shared_ptr<PsSlice>> part;
  {
    absl::ReaderMutexLock lock(&mu_);
    part = Find(key);
  }
  if (absl::IsNotFound(part.status())) {
    reply(absl::FailedPreconditionError(absl::StrCat(
        "push for job ", key, " which is not initialised on this shard")));
    return;
  }
  if (!part.ok()) {
    reply(part.status());
    return;
  }
  PsCompletions done;
  (*part)->Push(step, rank, count, accumulate, std::move(reply), &done);
  RunCompletions(&done);
}

void PsStore::EndJob(const std::string& job_id, const std::string& reason) {
  const std::string why =
      reason.empty() ? absl::StrCat("job ", job_id, " ended") : reason;
  std::vector<std::shared_ptr<PsSlice>> dropped;
  std::vector<Reply> waiters;
  {
    absl::MutexLock lock(&mu_);
    ended_[job_id] = why;
    for (auto it = slices_.begin(); it != slices_.end();) {
      if (JobOf(it->first) != job_id) {
        ++it;
        continue;
      }
      dropped.push_back(std::move(it->second));
      it = slices_.erase(it);
    }
    for (auto w = pull_waiters_.begin(); w != pull_waiters_.end();) {
      if (JobOf(w->first) != job_id) {
        ++w;
        continue;
      }
      for (Reply& r : w->second) waiters.push_back(std::move(r));
      w = pull_waiters_.erase(w);
    }
  }
  // A push that found a slice before it was dropped is failed by End.
  PsCompletions done;
  for (auto& part : dropped) part->End(absl::AbortedError(why), &done);
  RunCompletions(&done);
  for (Reply& r : waiters) r(absl::AbortedError(why));
}

void PsStore::Shutdown() {
  std::map<std::string, std::shared_ptr<PsSlice>> dropped;
  std::map<std::string, std::vector<Reply>> waiters;
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
    dropped.swap(slices_);
    waiters.swap(pull_waiters_);
  }
  PsCompletions done;
  for (auto& [key, part] : dropped) part->End(ShuttingDown(), &done);
  RunCompletions(&done);
  for (auto& [key, list] : waiters) {
    for (Reply& r : list) r(ShuttingDown());
  }
}

size_t PsStore::NumJobs() const {
  absl::MutexLock lock(&mu_);
  return slices_.size();
}

}  // namespace gradsync
