// GRADSYNC_VECTOR_CLONES before a hot loop's function makes GCC/Clang build
// it twice, for AVX2 and for the x86-64 baseline, and pick one at load time
// (an ifunc): wider vectors where the CPU has them, no SIGILL where it does
// not. Elsewhere it expands to nothing. The files using it are compiled with
// -O3 (common/CMakeLists.txt): at -O2 GCC 12 vectorizes only loops whose trip
// count it knows, and these kernels ran at a third of memory bandwidth.
#ifndef GRADSYNC_COMMON_VECTOR_CLONES_H_
#define GRADSYNC_COMMON_VECTOR_CLONES_H_

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(GRADSYNC_NO_VECTOR_CLONES)
#define GRADSYNC_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define GRADSYNC_VECTOR_CLONES
#endif

#endif  // GRADSYNC_COMMON_VECTOR_CLONES_H_
