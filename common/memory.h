// Process-wide allocator settings for daemons that move large tensors.
#ifndef GRADSYNC_COMMON_MEMORY_H_
#define GRADSYNC_COMMON_MEMORY_H_

namespace gradsync {

// Makes glibc malloc serve and keep buffers of up to 256 MiB from its heaps
// instead of mmap-ing a fresh mapping for each one and unmapping it on free.
// gRPC allocates a new buffer for every received message; with glibc's
// defaults a 1 MiB one is a fresh mmap, so every received byte costs a page
// fault (a quarter of the ring's CPU time on loopback, measured with perf;
// docs/architecture.md "Send blocks"). Freed memory stays in the process up
// to its peak use. Call once at the start of main(), before threads start.
void TuneAllocatorForLargeBuffers();

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_MEMORY_H_
