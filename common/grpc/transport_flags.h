// The command-line flags of gRPC transport tuning shared by gradsync-worker,
// the gradsync CLI (`local` passes them on to its workers) and
// bench/allreduce_compare: --peer_bdp_probe and --ps_push_streams
// (grpc_util.h).
#ifndef GRADSYNC_COMMON_GRPC_TRANSPORT_FLAGS_H_
#define GRADSYNC_COMMON_GRPC_TRANSPORT_FLAGS_H_

#include <string>

namespace gradsync {

// SetPeerBdpProbe(--peer_bdp_probe), SetPsPushStreams(--ps_push_streams).
// Call before the first channel or server is made.
void ApplyTransportFlags();

// "--peer_bdp_probe=true|false" with this process's setting, for workers it
// starts.
std::string PeerBdpProbeArg();
// "--ps_push_streams=true|false", likewise.
std::string PsPushStreamsArg();

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_GRPC_TRANSPORT_FLAGS_H_
