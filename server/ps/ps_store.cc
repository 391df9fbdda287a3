#include "server/ps/ps_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/kernels.h"

namespace gradsync {
namespace {

// "j-3/b0s1" -> "j-3".
std::string JobOf(const std::string& key) { return key.substr(0, key.find('/')); }

}  // namespace

ParamSnapshot PsStore::Snapshot(Job* job) {
  if (job->snapshot_version != job->version) {
    job->snapshot = std::make_shared<const std::vector<float>>(job->params);
    job->snapshot_version = job->version;
  }
  return job->snapshot;
}

void PsStore::Run(std::vector<Completion>* done) {
  for (Completion& c : *done) c.reply(std::move(c.result));
  done->clear();
}

absl::Status PsStore::Init(const std::string& job_id,
                           const ShardJobConfig& config,
                           std::vector<float> initial) {
  if (config.world_size < 1) {
    return absl::InvalidArgumentError("shard config: world_size must be >= 1");
  }
  // Async: every push moves the parameters 1/N as far as a sync step would.
  // Scaling the learning rate (not the gradient) keeps that true for Adam,
  // whose update ignores the gradient's scale; for SGD both are the same.
  OptimizerOptions oo = config.optimizer;
  if (config.async) oo.lr /= config.world_size;
  absl::StatusOr<Optimizer> opt = Optimizer::Create(oo, initial.size());
  if (!opt.ok()) return opt.status();
  std::vector<Completion> done;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return absl::UnavailableError("parameter server shutting down");
    if (ended_.count(JobOf(job_id))) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " already ended on this shard"));
    }
    if (jobs_.count(job_id)) {
      return absl::AlreadyExistsError(
          absl::StrCat("job ", job_id, " already initialised on this shard"));
    }
    auto job = std::make_unique<Job>();
    job->config = config;
    job->optimizer = std::make_unique<Optimizer>(std::move(*opt));
    job->params = std::move(initial);
    job->scratch.assign(job->params.size(), 0.0f);
    job->pushed.assign(config.world_size, false);
    job->clock.assign(config.world_size, 0);
    Job* j = job.get();
    j->initial = Snapshot(j);
    jobs_[job_id] = std::move(job);
    auto it = pull_waiters_.find(job_id);
    if (it != pull_waiters_.end()) {
      for (Reply& r : it->second) {
        done.push_back({std::move(r), PsReply{Snapshot(j), 0}});
      }
      pull_waiters_.erase(it);
    }
  }
  Run(&done);
  return absl::OkStatus();
}

void PsStore::Pull(const std::string& job_id, bool initial, Reply reply) {
  absl::StatusOr<PsReply> result;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) {
      result = absl::UnavailableError("parameter server shutting down");
    } else if (auto e = ended_.find(JobOf(job_id)); e != ended_.end()) {
      result = absl::AbortedError(e->second);
    } else if (auto it = jobs_.find(job_id); it != jobs_.end()) {
      Job* job = it->second.get();
      result = initial ? PsReply{job->initial, 0}
                       : PsReply{Snapshot(job),
                                 job->config.async ? job->version : job->step};
    } else {
      pull_waiters_[job_id].push_back(std::move(reply));
      return;
    }
  }
  reply(std::move(result));
}

void PsStore::ReleaseHeld(Job* job, std::vector<Completion>* done) {
  if (job->held.empty()) return;
  const int64_t slowest =
      *std::min_element(job->clock.begin(), job->clock.end());
  std::vector<Job::Held> still;
  for (Job::Held& h : job->held) {
    // The rank's next step is clock[rank]; it may start it when it is at most
    // `staleness` steps ahead of the slowest rank.
    if (job->config.staleness < 0 ||
        job->clock[h.rank] - slowest <= job->config.staleness) {
      done->push_back({std::move(h.reply), PsReply{Snapshot(job), job->version}});
    } else {
      still.push_back(std::move(h));
    }
  }
  job->held = std::move(still);
}

void PsStore::Push(const std::string& job_id, int64_t step, int rank,
                   size_t count, absl::FunctionRef<void(float*)> accumulate,
                   Reply reply) {
  std::vector<Completion> done;
  absl::Status error;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (shutdown_) {
      error = absl::UnavailableError("parameter server shutting down");
    } else if (auto e = ended_.find(JobOf(job_id)); e != ended_.end()) {
      error = absl::AbortedError(e->second);
    } else if (it == jobs_.end()) {
      error = absl::FailedPreconditionError(absl::StrCat(
          "push for job ", job_id, " which is not initialised on this shard"));
    } else {
      Job* job = it->second.get();
      const int world = job->config.world_size;
      if (count != job->params.size()) {
        error = absl::InvalidArgumentError(absl::StrCat(
            "push of ", count, " floats to a shard slice of ",
            job->params.size(), " (rank ", rank, ", step ", step, ")"));
      } else if (rank < 0 || rank >= world) {
        error = absl::InvalidArgumentError(
            absl::StrCat("push from rank ", rank, " in a job of ", world));
      } else if (!job->config.async) {
        if (step != job->step || job->pushed[rank]) {
          error = absl::FailedPreconditionError(absl::StrCat(
              "rank ", rank, " pushed step ", step, " but the shard is reducing step ",
              job->step, job->pushed[rank] ? " and already has this rank's push" : ""));
        } else {
          accumulate(job->scratch.data());
          job->pushed[rank] = true;
          job->waiting.push_back(std::move(reply));
          if (++job->pushes == world) {
            Scale(job->scratch.data(), 1.0f / world, job->scratch.size());
            job->optimizer->Apply(job->params.data(), job->scratch.data());
            std::fill(job->scratch.begin(), job->scratch.end(), 0.0f);
            std::fill(job->pushed.begin(), job->pushed.end(), false);
            job->pushes = 0;
            ++job->step;
            ++job->version;
            ParamSnapshot snap = Snapshot(job);
            for (Reply& r : job->waiting) {
              done.push_back({std::move(r), PsReply{snap, job->step}});
            }
            job->waiting.clear();
          }
        }
      } else {
        if (step != job->clock[rank]) {
          error = absl::FailedPreconditionError(absl::StrCat(
              "rank ", rank, " pushed step ", step, " but its next step is ",
              job->clock[rank]));
        } else {
          std::fill(job->scratch.begin(), job->scratch.end(), 0.0f);
          accumulate(job->scratch.data());
          job->optimizer->Apply(job->params.data(), job->scratch.data());
          ++job->version;
          ++job->clock[rank];
          job->held.push_back({rank, std::move(reply)});
          ReleaseHeld(job, &done);
        }
      }
    }
  }
  if (!error.ok()) {
    reply(error);
    return;
  }
  Run(&done);
}

void PsStore::EndJob(const std::string& job_id, const std::string& reason) {
  std::vector<Completion> done;
  {
    absl::MutexLock lock(&mu_);
    const std::string why =
        reason.empty() ? absl::StrCat("job ", job_id, " ended") : reason;
    ended_[job_id] = why;
    auto ours = [&job_id](const std::string& key) { return JobOf(key) == job_id; };
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      if (!ours(it->first)) {
        ++it;
        continue;
      }
      for (Reply& r : it->second->waiting) {
        done.push_back({std::move(r), absl::AbortedError(why)});
      }
      for (Job::Held& h : it->second->held) {
        done.push_back({std::move(h.reply), absl::AbortedError(why)});
      }
      it = jobs_.erase(it);
    }
    for (auto w = pull_waiters_.begin(); w != pull_waiters_.end();) {
      if (!ours(w->first)) {
        ++w;
        continue;
      }
      for (Reply& r : w->second) done.push_back({std::move(r), absl::AbortedError(why)});
      w = pull_waiters_.erase(w);
    }
  }
  Run(&done);
}

void PsStore::Shutdown() {
  std::vector<Completion> done;
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
    const absl::Status st = absl::UnavailableError("parameter server shutting down");
    for (auto& [id, job] : jobs_) {
      for (Reply& r : job->waiting) done.push_back({std::move(r), st});
      for (Job::Held& h : job->held) done.push_back({std::move(h.reply), st});
    }
    jobs_.clear();
    for (auto& [id, waiters] : pull_waiters_) {
      for (Reply& r : waiters) done.push_back({std::move(r), st});
    }
    pull_waiters_.clear();
  }
  Run(&done);
}

size_t PsStore::NumJobs() const {
  absl::MutexLock lock(&mu_);
  return jobs_.size();
}

}  // namespace gradsync
