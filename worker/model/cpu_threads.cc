#include "worker/model/cpu_threads.h"

#include <cblas.h>

#include <algorithm>

namespace gradsync {

int CpuComputeThreads(int cores, int ranks_on_host) {
  cores = std::max(cores, 1);
  ranks_on_host = std::max(ranks_on_host, 1);
  return std::max(1, (cores - ranks_on_host) / ranks_on_host);
}

void SetBlasThreads(int threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}

int BlasThreads() { return openblas_get_num_threads(); }

}  // namespace gradsync
