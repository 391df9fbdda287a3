// The words a rank's error uses to blame a peer rank, in one place: the
// worker's transport writes them (worker/collectives/transport/grpc), and
// the coordinator reads them back to know which member an elastic job's
// failed generation blames, so that it leaves that member out of the next
// one (issue 51: a spare that cannot be reached was taken back every
// generation).
#ifndef GRADSYNC_COMMON_SPEC_PEER_BLAME_H_
#define GRADSYNC_COMMON_SPEC_PEER_BLAME_H_

#include <string>

#include "absl/strings/string_view.h"

namespace gradsync {

// "rank R cannot reach rank P" (a connection to P's Peer port failed).
std::string CannotReachPeerText(int rank, int peer);
// "rank R: no data from rank P" (P sent nothing before the step timeout).
std::string NoDataFromPeerText(int rank, int peer);

// The peer rank that an error of those two forms blames (the first, if it
// names several); -1 when it names none.
int BlamedPeerRank(absl::string_view error);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_SPEC_PEER_BLAME_H_
