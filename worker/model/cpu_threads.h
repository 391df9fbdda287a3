// How many threads the CPU model's GEMMs (OpenBLAS) may use.
//
// OpenBLAS starts one thread per core in every process and its idle threads
// spin. With several workers on one host, that is cores x workers spinning
// threads fighting over the cores with the workers' own communication
// threads: measured on a 16-core host, 8 local workers trained at 8.5k
// samples/s (ring sync) with OpenBLAS's default and at 31k with one BLAS
// thread each, while one worker alone was 1.8x faster with all cores. So a
// worker sizes its BLAS pool per job from the ranks of that job on its host.
#ifndef GRADSYNC_WORKER_MODEL_CPU_THREADS_H_
#define GRADSYNC_WORKER_MODEL_CPU_THREADS_H_

namespace gradsync {

// Threads per rank when `ranks_on_host` ranks share `cores` cores: the
// cores left after one per rank for its communication (gRPC, the comm
// pipeline), split evenly, at least 1. cores <= 0 counts as 1.
int CpuComputeThreads(int cores, int ranks_on_host);

// Sets the process's BLAS thread count (threads >= 1); a no-op for
// threads <= 0. Process-wide: a worker runs one job at a time.
void SetBlasThreads(int threads);

// The process's BLAS thread count now.
int BlasThreads();

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_CPU_THREADS_H_
