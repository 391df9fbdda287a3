#include "common/partition.h"

#include <algorithm>

namespace gradsync {

std::vector<Range> PartitionEven(size_t n, int parts) {
  std::vector<Range> out;
  if (parts < 1) return out;
  const size_t p = static_cast<size_t>(parts);
  const size_t base = n / p;
  const size_t extra = n % p;
  size_t begin = 0;
  out.reserve(p);
  for (size_t i = 0; i < p; ++i) {
    const size_t size = base + (i < extra ? 1 : 0);
    out.push_back(Range{begin, size});
    begin += size;
  }
  return out;
}

std::vector<Range> Segments(Range r, size_t max_elems) {
  std::vector<Range> out;
  if (max_elems == 0) max_elems = 1;
  for (size_t b = r.begin; b < r.end(); b += max_elems) {
    out.push_back(Range{b, std::min(max_elems, r.end() - b)});
  }
  return out;
}

}  // namespace gradsync
