#!/bin/sh
# Copied by deploy/devbundle.sh to .devbundle/net/bin/ip and .devbundle/net/bin/tc:
# runs the bundled binary of the same name (.devbundle/net/real/NAME) with the
# loader pointed at the bundled libraries (.devbundle/net/lib).
D=$(cd "$(dirname "$0")/.." && pwd)
b=$(basename "$0")
LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-} exec "$D/real/$b" "$@"
