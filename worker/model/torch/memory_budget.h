// A memory budget for a job's libtorch tensors (issue 51, finding 6). A
// user's model can allocate as much as it likes; without a budget, one that
// asks for more than the machine (or its container) has gets the whole
// worker daemon killed by the kernel. With one, the allocation that would
// pass it fails inside libtorch as an out-of-memory error, which the job
// reports as RESOURCE_EXHAUSTED (TorchError), and the daemon stays up.
//
// The budget is libtorch's CPU allocator wrapped once per process
// (c10::SetCPUAllocator): every tensor's bytes are counted while it lives.
// A worker runs one job at a time, so a process-wide count is the job's:
// each limit is set as a number of bytes beyond those held when it is set
// (the data cache's and earlier jobs' leftovers are not the new job's).
//
// What it does not count: memory outside libtorch's CPU allocator (the
// daemon's own buffers, the interpreter's bookkeeping), so it is a bound on
// what a model asks for, not on the process's RSS.
#ifndef GRADSYNC_WORKER_MODEL_TORCH_MEMORY_BUDGET_H_
#define GRADSYNC_WORKER_MODEL_TORCH_MEMORY_BUDGET_H_

#include <cstdint>

namespace gradsync {

// Installs the counting allocator (the first call with a limit; later ones
// only set the limit) and lets tensors allocated from now on take at most
// `max_bytes` beyond the bytes live now; max_bytes <= 0: no limit (before
// any limit was set, libtorch's own allocator stays, uncounted).
// Thread-safe.
void SetTorchMemoryLimit(int64_t max_bytes);

// Puts libtorch's default CPU allocator back (tensors of the counting one
// are still freed by it); the next SetTorchMemoryLimit with a limit
// installs the counting one again. For benchmarks that time both in one
// process (bench/peers/torch_step_compare --budget_bytes).
void RestoreLibtorchCpuAllocator();

// Bytes of tensors allocated through the counting allocator and still live
// (0 before the first SetTorchMemoryLimit).
int64_t TorchMemoryInUse();

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_TORCH_MEMORY_BUDGET_H_
