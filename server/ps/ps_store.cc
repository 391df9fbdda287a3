#include "server/ps/ps_store.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gradsync {
namespace {

// "j-3/p1" -> "j-3".
std::string JobOf(const std::string& key) { return key.substr(0, key.find('/')); }
// "j-3/p1" -> "p1"; "j-3" -> "all".
std::string PieceOf(const std::string& key) {
  const size_t slash = key.find('/');
  return slash == std::string::npos ? "all" : key.substr(slash + 1);
}

// Checks that checkpoint `c` (read from `path`) is what `config` resumes.
absl::Status CheckResumed(const Checkpoint& c, const std::string& path,
                          const ShardJobConfig& config, size_t size) {
  const std::string want = absl::StrCat(config.resume_from, "/", config.piece);
  if (c.key != want || c.step != config.resume_step || c.params.size() != size) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", path, " holds ", c.params.size(), " parameters of ",
                     c.key, " at step ", c.step, "; resuming needs ", size, " of ", want,
                     " at step ", config.resume_step, " (another model or layout?)"));
  }
  return absl::OkStatus();
}

absl::Status ShuttingDown() {
  return absl::UnavailableError("parameter server shutting down");
}

void ReplyAll(std::vector<PendingPull>& waiters, const absl::Status& why) {
  for (PendingPull& p : waiters) p.reply(why);
}

absl::Status PullExpired() {
  return absl::DeadlineExceededError("pull waited past its deadline on this PS shard");
}

}  // namespace

absl::StatusOr<std::shared_ptr<PsSlice>> PsStore::Find(const std::string& key) const {
  if (shutdown_) return ShuttingDown();
  if (auto e = ended_.find(JobOf(key)); e != ended_.end()) {
    return absl::AbortedError(e->second);
  }
  auto it = slices_.find(key);
  if (it == slices_.end()) return absl::NotFoundError(key);
  return it->second;
}

absl::StatusOr<std::unique_ptr<PsSlice>> PsStore::MakeSlice(
    const std::string& key, ShardJobConfig config, std::vector<float> initial) const {
  const bool resume = !config.resume_from.empty();
  if (config.checkpoint_every <= 0 && !resume) {
    return PsSlice::Create(config, std::move(initial));
  }
  if (checkpoint_root_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", key,
                     " uses checkpoints but this PS shard has no state "
                     "directory"));
  }
  config.checkpoint_dir = absl::StrCat(checkpoint_root_, "/", JobOf(key));
  config.piece = PieceOf(key);
  config.key = key;
  config.env = env_;
  absl::StatusOr<std::unique_ptr<PsSlice>> slice =
      resume ? ResumeSlice(config, initial.size())
             : PsSlice::Create(config, std::move(initial));
  if (slice.ok() && config.checkpoint_at_start && config.checkpoint_every > 0) {
    if (absl::Status st = (*slice)->CheckpointStart(); !st.ok()) return st;
  }
  return slice;
}

absl::StatusOr<std::unique_ptr<PsSlice>> PsStore::ResumeSlice(
    const ShardJobConfig& config, size_t size) const {
  if (config.resume_from.find('/') != std::string::npos || config.resume_from[0] == '.') {
    return absl::InvalidArgumentError(
        absl::StrCat("resume_from: bad job id '", config.resume_from, "'"));
  }
  const std::string path =
      CheckpointFile(absl::StrCat(checkpoint_root_, "/", config.resume_from),
                     config.piece, config.resume_step);
  absl::StatusOr<Checkpoint> c = ReadCheckpoint(path, env_);
  if (!c.ok()) return c.status();
  absl::Status st = CheckResumed(*c, path, config, size);
  if (!st.ok()) return st;
  return PsSlice::Resume(config, *std::move(c));
}

CheckpointListing PsStore::Checkpoints(const std::string& job_id) const {
  CheckpointListing out;
  if (checkpoint_root_.empty() || job_id.empty() ||
      job_id.find('/') != std::string::npos || job_id[0] == '.') {
    return out;
  }
  const auto listing = ListCheckpoints(absl::StrCat(checkpoint_root_, "/", job_id));
  const std::set<int64_t> common = CommonSteps(listing);
  out.steps.assign(common.begin(), common.end());
  out.slices = static_cast<int>(listing.size());
  return out;
}

absl::Status PsStore::Init(const std::string& key, const ShardJobConfig& config,
                           std::vector<float> initial) {
  absl::StatusOr<std::unique_ptr<PsSlice>> made =
      MakeSlice(key, config, std::move(initial));
  if (!made.ok()) return made.status();
  std::shared_ptr<PsSlice> part = *std::move(made);
  std::vector<PendingPull> waiters;
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
    waiters = pull_waiters_.Take(key);
  }
  for (PendingPull& p : waiters) p.reply(part->Pull(/*initial=*/true));
  return absl::OkStatus();
}

uint64_t PsStore::Wait(PullWaiters* waiters, const std::string& key, int rank,
                       Reply* reply, absl::Time deadline, absl::Status* refused,
                       std::vector<PendingPull>* expired) {
  const absl::Time now = env_->Now();
  for (PullWaiters* w : {&pull_waiters_, &final_waiters_}) {
    for (PendingPull& p : w->Expire(now)) expired->push_back(std::move(p));
  }
  PendingPull p;
  p.ticket = next_ticket_++;
  p.reply = std::move(*reply);
  p.deadline = std::min(deadline, now + kMaxPullWait);
  p.rank = rank;
  *refused = waiters->Add(key, p);
  if (!refused->ok()) {
    *reply = std::move(p.reply);
    return 0;
  }
  return p.ticket;
}

uint64_t PsStore::Pull(const std::string& key, bool initial, Reply reply,
                       absl::Time deadline) {
  absl::StatusOr<std::shared_ptr<PsSlice>> part;
  std::vector<PendingPull> expired;
  absl::Status refused;
  uint64_t ticket = 0;
  {
    absl::MutexLock lock(&mu_);
    part = Find(key);
    if (absl::IsNotFound(part.status())) {
      ticket = Wait(&pull_waiters_, key, -1, &reply, deadline, &refused, &expired);
    }
  }
  ReplyAll(expired, PullExpired());
  if (ticket != 0) return ticket;
  if (!refused.ok()) {
    reply(refused);
  } else if (!part.ok()) {
    reply(part.status());
  } else {
    reply((*part)->Pull(initial));
  }
  return 0;
}

uint64_t PsStore::FinalPull(const std::string& key, int rank, Reply reply,
                            absl::Time deadline) {
  absl::StatusOr<std::shared_ptr<PsSlice>> part;
  std::vector<PendingPull> expired, ready;
  absl::Status refused;
  uint64_t ticket = 0;
  {
    absl::MutexLock lock(&mu_);
    part = Find(key);
    if (part.ok()) {
      ticket = Wait(&final_waiters_, key, rank, &reply, deadline, &refused, &expired);
      if (ticket != 0 &&
          final_waiters_.Ranks(key) >= static_cast<size_t>((*part)->world_size())) {
        ready = final_waiters_.Take(key);
        ticket = 0;
      }
    }
  }
  ReplyAll(expired, PullExpired());
  for (PendingPull& p : ready) p.reply((*part)->Pull(/*initial=*/false));
  if (ticket != 0 || !ready.empty()) return ticket;
  if (absl::IsNotFound(part.status())) {
    reply(absl::FailedPreconditionError(absl::StrCat(
        "final pull for job ", key, " which is not initialised on this shard")));
  } else {
    reply(part.ok() ? refused : part.status());
  }
  return 0;
}

void PsStore::CancelPull(uint64_t ticket, const absl::Status& why) {
  std::optional<PendingPull> p;
  {
    absl::MutexLock lock(&mu_);
    p = pull_waiters_.Cancel(ticket);
    if (!p) p = final_waiters_.Cancel(ticket);
  }
  if (p) p->reply(why);
}

void PsStore::Push(const std::string& key, int64_t step, int rank, size_t count,
                   absl::FunctionRef<void(float*)> accumulate, Reply reply) {
  absl::StatusOr<std::shared_ptr<PsSlice>> part;
  {
    absl::ReaderMutexLock lock(&mu_);
    part = Find(key);
  }
  if (!part.ok()) {
    reply(PushRefusal(key, part.status()));
    return;
  }
  PsCompletions done;
  (*part)->Push(step, rank, count, accumulate, std::move(reply), &done);
  RunCompletions(&done);
}

bool PsStore::TryPush(const std::string& key, int64_t step, int rank, size_t count,
                      absl::FunctionRef<void(float*)> accumulate, Reply* reply,
                      PsCompletions* done) {
  if (!mu_.ReaderTryLock()) return false;
  absl::StatusOr<std::shared_ptr<PsSlice>> part = absl::UnknownError("");
  try {
    part = Find(key);
  } catch (...) {
    mu_.ReaderUnlock();  // never leave the store locked (bad_alloc)
    throw;
  }
  mu_.ReaderUnlock();
  if (!part.ok()) {
    done->push_back({std::move(*reply), PushRefusal(key, part.status())});
    return true;
  }
  return (*part)->TryPush(step, rank, count, accumulate, reply, done);
}

absl::Status PsStore::PushRefusal(const std::string& key, const absl::Status& why) {
  if (absl::IsNotFound(why)) {
    return absl::FailedPreconditionError(
        absl::StrCat("push for job ", key, " which is not initialised on this shard"));
  }
  return why;
}

void PsStore::EndJob(const std::string& job_id, const std::string& reason) {
  const std::string why =
      reason.empty() ? absl::StrCat("job ", job_id, " ended") : reason;
  std::vector<std::shared_ptr<PsSlice>> dropped;
  std::vector<PendingPull> waiters;
  {
    absl::MutexLock lock(&mu_);
    RememberEnded(job_id, why);
    for (auto it = slices_.begin(); it != slices_.end();) {
      if (JobOf(it->first) != job_id) {
        ++it;
        continue;
      }
      dropped.push_back(std::move(it->second));
      it = slices_.erase(it);
    }
    auto of_job = [&job_id](const std::string& k) { return JobOf(k) == job_id; };
    waiters = pull_waiters_.TakeIf(of_job);
    for (PendingPull& p : final_waiters_.TakeIf(of_job)) {
      waiters.push_back(std::move(p));
    }
  }
  // A push that found a slice before it was dropped is failed by End.
  PsCompletions done;
  for (auto& part : dropped) part->End(absl::AbortedError(why), &done);
  RunCompletions(&done);
  ReplyAll(waiters, absl::AbortedError(why));
}

void PsStore::Shutdown() {
  std::map<std::string, std::shared_ptr<PsSlice>> dropped;
  std::vector<PendingPull> waiters;
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
    dropped.swap(slices_);
    auto all = [](const std::string&) { return true; };
    waiters = pull_waiters_.TakeIf(all);
    for (PendingPull& p : final_waiters_.TakeIf(all)) {
      waiters.push_back(std::move(p));
    }
  }
  PsCompletions done;
  for (auto& [key, part] : dropped) part->End(ShuttingDown(), &done);
  RunCompletions(&done);
  ReplyAll(waiters, ShuttingDown());
}

size_t PsStore::NumPendingPulls() const {
  absl::MutexLock lock(&mu_);
  return pull_waiters_.size() + final_waiters_.size();
}

size_t PsStore::NumJobs() const {
  absl::MutexLock lock(&mu_);
  return slices_.size();
}

void PsStore::RememberEnded(const std::string& job_id, const std::string& why) {
  auto [it, inserted] = ended_.emplace(job_id, "");
  it->second = why.substr(0, kMaxEndReasonBytes);
  if (!inserted) return;
  ended_order_.push_back(job_id);
  while (ended_order_.size() > max_ended_jobs_) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
}

size_t PsStore::NumEndedJobs() const {
  absl::MutexLock lock(&mu_);
  return ended_.size();
}

}  // namespace gradsync
