// The process-wide settings both daemons (gradsync-worker, gradsync-server)
// make at the start of main(), in one place.
#ifndef GRADSYNC_COMMON_PROCESS_SETUP_H_
#define GRADSYNC_COMMON_PROCESS_SETUP_H_

namespace gradsync {

// Before any thread starts:
//  - turns off abseil's Mutex deadlock detection: Debian's abseil is built
//    with it on, so every lock (gRPC's included) updates a global lock graph
//    under a global lock, several percent of the CPU per message on a small
//    machine (4 KiB allreduce, 4 ranks on 2 cores: 517 -> 481 us median).
//    Tests, which never run the daemons' main(), keep it on;
//  - TuneAllocatorForLargeBuffers (common/memory.h);
//  - FlushDenormalsToZero (common/float_env.h).
void PrepareDaemonProcess();

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_PROCESS_SETUP_H_
