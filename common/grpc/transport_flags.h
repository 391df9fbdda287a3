// The command-line flag of gRPC transport tuning shared by gradsync-worker,
// the gradsync CLI (`local` passes it on to its workers) and
// bench/allreduce_compare: --peer_bdp_probe (grpc_util.h).
#ifndef GRADSYNC_COMMON_GRPC_TRANSPORT_FLAGS_H_
#define GRADSYNC_COMMON_GRPC_TRANSPORT_FLAGS_H_

#include <string>

namespace gradsync {

// SetPeerBdpProbe(--peer_bdp_probe). Call before the first channel or
// server is made.
void ApplyTransportFlags();

// "--peer_bdp_probe=true|false" with this process's setting, for workers it
// starts.
std::string PeerBdpProbeArg();

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_GRPC_TRANSPORT_FLAGS_H_
