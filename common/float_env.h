// The floating-point environment of the daemons' threads.
#ifndef GRADSYNC_COMMON_FLOAT_ENV_H_
#define GRADSYNC_COMMON_FLOAT_ENV_H_

namespace gradsync {

// Sets flush-to-zero and denormals-are-zero (x86 MXCSR FTZ | DAZ) on the
// calling thread; threads it starts afterwards inherit them (Linux copies the
// creating thread's FPU state). Why: Fashion-MNIST's always-blank border
// pixels give their first-layer weights a zero gradient forever, so Adam's
// first moment of those weights decays by beta1 every step and spends some
// 150 steps among the subnormal numbers, where each operation takes a
// microcode assist of ~100 cycles. A CPU worker's step took 1.7 ms over the
// first 300 steps and 3.8 ms on average over 1875 (one worker, 16 cores).
// Flushing changes results only where values are below 1.2e-38 (what
// TensorFlow does by default). Call at the start of main(), before threads
// start. A no-op where the CPU is not x86.
void FlushDenormalsToZero();

// Whether the calling thread flushes (FTZ and DAZ both set).
bool FlushesDenormals();

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_FLOAT_ENV_H_
