#include "common/float_env.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace gradsync {

#if defined(__x86_64__) || defined(__i386__)
namespace {
constexpr unsigned kFtz = 0x8000;  // MXCSR bit 15: flush results to zero
constexpr unsigned kDaz = 0x0040;  // MXCSR bit 6: read subnormal inputs as zero
}  // namespace

void FlushDenormalsToZero() { _mm_setcsr(_mm_getcsr() | kFtz | kDaz); }

bool FlushesDenormals() { return (_mm_getcsr() & (kFtz | kDaz)) == (kFtz | kDaz); }
#else
void FlushDenormalsToZero() {}
bool FlushesDenormals() { return false; }
#endif

}  // namespace gradsync
