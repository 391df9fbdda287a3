#include "server/ps/ps_slice.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/kernels.h"

namespace gradsync {

void RunCompletions(PsCompletions* done) {
  for (PsCompletion& c : *done) c.reply(std::move(c.result));
  done->clear();
}

absl::StatusOr<Optimizer> PsSlice::MakeOptimizer(const ShardJobConfig& config, size_t n) {
  if (config.world_size < 1) {
    return absl::InvalidArgumentError("shard config: world_size must be >= 1");
  }
  // Async: every push moves the parameters 1/N as far as a sync step would.
  // Scaling the learning rate (not the gradient) keeps that true for Adam,
  // whose update ignores the gradient's scale; for SGD both are the same.
  OptimizerOptions oo = config.optimizer;
  if (config.async) oo.lr /= config.world_size;
  return Optimizer::Create(oo, n);
}

absl::StatusOr<std::unique_ptr<PsSlice>> PsSlice::Create(const ShardJobConfig& config,
                                                         std::vector<float> initial) {
  absl::StatusOr<Optimizer> opt = MakeOptimizer(config, initial.size());
  if (!opt.ok()) return opt.status();
  return std::unique_ptr<PsSlice>(
      new PsSlice(config, *std::move(opt), std::move(initial), 0));
}

absl::StatusOr<std::unique_ptr<PsSlice>> PsSlice::Resume(const ShardJobConfig& config,
                                                         Checkpoint from) {
  absl::StatusOr<Optimizer> opt = MakeOptimizer(config, from.params.size());
  if (!opt.ok()) return opt.status();
  absl::Status st = opt->Restore(from.optimizer_steps, std::move(from.first_moment),
                                 std::move(from.second_moment));
  if (!st.ok()) return st;
  return std::unique_ptr<PsSlice>(
      new PsSlice(config, *std::move(opt), std::move(from.params), from.step));
}

PsSlice::PsSlice(const ShardJobConfig& config, Optimizer optimizer,
                 std::vector<float> initial, int64_t start_step)
    : config_(config),
      size_(initial.size()),
      initial_(std::make_shared<const std::vector<float>>(initial)),
      start_step_(start_step),
      optimizer_(std::move(optimizer)),
      params_(std::move(initial)) {
  absl::MutexLock lock(&mu_);
  step_ = start_step_;
  scratch_.assign(size_, 0.0f);
  pushed_.assign(config_.world_size, false);
  // async: every rank continues at the resumed step.
  clock_.assign(config_.world_size, start_step_);
  checkpointed_ = start_step_;
}

ParamSnapshot PsSlice::SnapshotLocked() {
  if (snapshot_version_ != version_) {
    if (snapshot_ != nullptr && snapshot_.use_count() == 1) {
      // Only we hold it (new references are made under mu_ only): reuse.
      std::copy(params_.begin(), params_.end(), snapshot_->begin());
    } else {
      snapshot_ = std::make_shared<std::vector<float>>(params_);
    }
    snapshot_version_ = version_;
  }
  return snapshot_;
}

absl::StatusOr<PsReply> PsSlice::Pull(bool initial) {
  absl::MutexLock lock(&mu_);
  if (!ended_.ok()) return ended_;
  if (initial || version_ == 0) return PsReply{initial_, start_step_};
  return PsReply{SnapshotLocked(), config_.async ? version_ : step_};
}

absl::Status PsSlice::CheckPush(int64_t step, int rank, size_t count) const {
  const int world = config_.world_size;
  if (!ended_.ok()) return ended_;
  if (count != size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("push of ", count, " floats to a shard slice of ", size_, " (rank ",
                     rank, ", step ", step, ")"));
  }
  if (rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("push from rank ", rank, " in a job of ", world));
  }
  if (!config_.async && (step != step_ || pushed_[rank])) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", rank, " pushed step ", step, " but the shard is reducing step ", step_,
        pushed_[rank] ? " and already has this rank's push" : ""));
  }
  if (config_.async && step != clock_[rank]) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", rank, " pushed step ", step, " but its next step is ", clock_[rank]));
  }
  return absl::OkStatus();
}

void PsSlice::Push(int64_t step, int rank, size_t count,
                   absl::FunctionRef<void(float*)> accumulate, Reply reply,
                   PsCompletions* done) {
  absl::MutexLock lock(&mu_);
  PushLocked(step, rank, count, accumulate, std::move(reply), done);
}

bool PsSlice::TryPush(int64_t step, int rank, size_t count,
                      absl::FunctionRef<void(float*)> accumulate, Reply* reply,
                      PsCompletions* done) {
  if (config_.checkpoint_every > 0) return false;  // const: no lock needed
  if (!mu_.TryLock()) return false;
  try {
    PushLocked(step, rank, count, accumulate, std::move(*reply), done);
  } catch (...) {
    mu_.Unlock();  // never leave the slice locked (bad_alloc)
    throw;
  }
  mu_.Unlock();
  return true;
}

void PsSlice::PushLocked(int64_t step, int rank, size_t count,
                         absl::FunctionRef<void(float*)> accumulate, Reply reply,
                         PsCompletions* done) {
  if (absl::Status st = CheckPush(step, rank, count); !st.ok()) {
    done->push_back({std::move(reply), std::move(st)});
    return;
  }
  if (!config_.async) {
    // 1. reduce this push into the step's sum now; 2. the N-th push runs the
    // optimizer step and answers everyone.
    accumulate(scratch_.data());
    pushed_[rank] = true;
    waiting_.push_back(std::move(reply));
    if (++pushes_ == config_.world_size) ApplySyncStepLocked(done);
    return;
  }
  std::fill(scratch_.begin(), scratch_.end(), 0.0f);
  accumulate(scratch_.data());
  optimizer_.Apply(params_.data(), scratch_.data());
  ++version_;
  ++clock_[rank];
  held_.push_back({rank, std::move(reply)});
  if (absl::Status st = MaybeCheckpointAsyncLocked(); !st.ok()) {
    EndLocked(st, done);
    return;
  }
  ReleaseHeldLocked(done);
}

void PsSlice::ApplySyncStepLocked(PsCompletions* done) {
  const int world = config_.world_size;
  Scale(scratch_.data(), 1.0f / world, scratch_.size());
  optimizer_.Apply(params_.data(), scratch_.data());
  std::fill(scratch_.begin(), scratch_.end(), 0.0f);
  std::fill(pushed_.begin(), pushed_.end(), false);
  pushes_ = 0;
  ++step_;
  ++version_;
  const int64_t k = config_.checkpoint_every;
  if (k > 0 && step_ % k == 0) {
    if (absl::Status st = WriteCheckpointLocked(step_); !st.ok()) {
      EndLocked(st, done);
      return;
    }
  }
  const ParamSnapshot snap = SnapshotLocked();
  for (Reply& r : waiting_) done->push_back({std::move(r), PsReply{snap, step_}});
  waiting_.clear();
}

absl::Status PsSlice::MaybeCheckpointAsyncLocked() {
  const int64_t k = config_.checkpoint_every;
  if (k <= 0) return absl::OkStatus();
  const int64_t slowest = *std::min_element(clock_.begin(), clock_.end());
  if (slowest <= checkpointed_ || slowest % k != 0) return absl::OkStatus();
  checkpointed_ = slowest;
  return WriteCheckpointLocked(slowest);
}

absl::Status PsSlice::CheckpointStart() {
  absl::MutexLock lock(&mu_);
  return WriteCheckpointLocked(start_step_);
}

absl::Status PsSlice::WriteCheckpointLocked(int64_t step) {
  const int64_t k = config_.checkpoint_every;
  CheckpointView view;
  view.key = config_.key;
  view.step = step;
  view.params = params_;
  view.optimizer_steps = optimizer_.steps();
  view.first_moment = optimizer_.first_moment();
  view.second_moment = optimizer_.second_moment();
  absl::Status st = WriteCheckpoint(
      CheckpointFile(config_.checkpoint_dir, config_.piece, step), view, config_.env);
  if (!st.ok()) return st;
  if (step - 2 * k > 0) {  // keep the last two (resume needs a common step)
    std::remove(
        CheckpointFile(config_.checkpoint_dir, config_.piece, step - 2 * k).c_str());
  }
  return absl::OkStatus();
}

void PsSlice::ReleaseHeldLocked(PsCompletions* done) {
  if (held_.empty()) return;
  const int64_t slowest = *std::min_element(clock_.begin(), clock_.end());
  std::vector<Held> still;
  for (Held& h : held_) {
    // The rank's next step is clock_[rank]; it may start it when it is at
    // most `staleness` steps ahead of the slowest rank.
    if (config_.staleness < 0 || clock_[h.rank] - slowest <= config_.staleness) {
      done->push_back({std::move(h.reply), PsReply{SnapshotLocked(), version_}});
    } else {
      still.push_back(std::move(h));
    }
  }
  held_ = std::move(still);
}

void PsSlice::End(const absl::Status& why, PsCompletions* done) {
  absl::MutexLock lock(&mu_);
  EndLocked(why, done);
}

void PsSlice::EndLocked(const absl::Status& why, PsCompletions* done) {
  if (ended_.ok()) ended_ = why;
  for (Reply& r : waiting_) done->push_back({std::move(r), why});
  waiting_.clear();
  for (Held& h : held_) done->push_back({std::move(h.reply), why});
  held_.clear();
}

}  // namespace gradsync
