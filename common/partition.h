// Splitting a flat vector of n elements into contiguous parts.
#ifndef GRADSYNC_COMMON_PARTITION_H_
#define GRADSYNC_COMMON_PARTITION_H_

#include <cstddef>
#include <vector>

namespace gradsync {

struct Range {
  size_t begin = 0;
  size_t size = 0;
  size_t end() const { return begin + size; }
};

// Splits [0, n) into `parts` contiguous ranges whose sizes differ by at most
// one element (balanced by bytes, since every element is 4 bytes). The first
// n % parts ranges get the extra element. Ranges may be empty when
// n < parts. Requires parts >= 1.
std::vector<Range> PartitionEven(size_t n, int parts);

// Cuts `r` into consecutive pieces of at most `max_elems` elements
// (max_elems >= 1). An empty range gives no pieces.
std::vector<Range> Segments(Range r, size_t max_elems);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_PARTITION_H_
