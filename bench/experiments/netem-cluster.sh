#!/usr/bin/env bash
# bench/experiments/netem-cluster.sh: an emulated cluster of H hosts on rate-limited links.
#
# Every host is a network namespace (${prefix}-h0 .. h(H-1)) whose eth0 is one
# end of a veth pair; the other end is a port of a Linux bridge living in a
# namespace of its own (${prefix}-br), so the root namespace is never touched.
# Hosts get ${subnet}.(10+i)/24, an address that exists only in there.
# Run with --help for the commands and flags, and see the "Shaping" comment
# above shape_dev for the tc choices.
set -euo pipefail

readonly PROG="netem-cluster"
readonly MARK="gradsync-netem"          # loopback alias prefix marking our namespaces
readonly SERVER_PORT=50051
readonly WORKER_PORT=7000
readonly PS_PORT=7100

# Flags (defaults).
HOSTS=""
RATE="1gbit"
DELAY="0ms"
LOSS="0%"
PREFIX="gsnet"
SUBNET="10.77.0"
START_DAEMONS=0
PS_ON_WORKERS=0
BUILD_DIR="build"
STATE_DIR="/run/gradsync-netem"
BURST=""
LIMIT=""
SHAPER="tbf"
WORKERS_PER_HOST=1
DOWNLINK=1
WAIT_S=60
KEEP_LOGS=0
PEER_BDP_PROBE=""
PS_INLINE_BYTES=""
PS_REDUCE_THREADS=""
DATA_DIR=""
HOST_RATES=""      # --host-rate: "I:RATE,..."
HOST_CPUS=""       # --host-cpu: "I:PERCENT,..."

# Derived / runtime state.
STATE_FILE=""
LOG_DIR=""
TOKEN=""
CREATED_NS=()      # namespaces this process created (authoritative for its trap)
STARTED_PIDS=()    # daemons this process started
UP_DONE=0
UP_RC=""        # the status a failed up exits with when it is not 1 (2, 3)
declare -A RATE_OF=()  # host index -> its --host-rate
declare -A CPU_OF=()   # host index -> its --host-cpu percent
CGROUP_ROOT=""     # where --host-cpu makes its groups (cgroup v2 or v1 cpu)
CGROUP_V=""        # 2 or 1

usage() {
  cat <<EOF
Usage: bench/experiments/netem-cluster.sh COMMAND [flags]

An emulated cluster: H hosts as network namespaces on one Linux bridge (itself
in a namespace), each host's link shaped by tc. The root namespace's
interfaces, routes and firewall are never touched.

Commands:
  up --hosts=H [flags]   create namespaces \${prefix}-br and \${prefix}-h0..h(H-1),
                         veth links, addresses \${subnet}.(10+i)/24 and qdiscs;
                         with --start-daemons also gradsync-server on h0 and
                         one gradsync-worker on each other host.
  down                   stop the daemons and delete the namespaces that the
                         state file records and that carry this tool's marker.
                         Refuses (exit 2) to delete a namespace it did not create.
  run HOST CMD [ARG...]  run CMD inside host HOST's namespace (ip netns exec),
                         e.g. run 0 build/bin/gradsync list --server=10.77.0.10:50051
                         (with GRADSYNC_TOKEN set to the cluster token when
                         --start-daemons made one).
  status                 namespaces, addresses, qdiscs (with counters), daemons.

Flags (--flag=VALUE or --flag VALUE):
  --hosts=H          up: number of hosts, 2..64 (required). h0 runs the server.
  --rate=RATE        up: link rate per direction, tc units bit|kbit|mbit|gbit|tbit
                     (default 1gbit; 8kbit..100gbit).
  --delay=TIME       up: one-way delay added to each host's egress (us|ms|s;
                     default 0ms). Ping RTT between two hosts is 2 x delay.
                     Needs the kernel's sch_netem.
  --loss=P%          up: random loss on each host's egress, 0..100% (default 0%).
                     Needs sch_netem; segmentation offload is turned off on the
                     host links (gso_max_segs 1) so it is per wire frame.
  --shaper=tbf|netem up: what enforces --rate (default tbf; see Shaping below).
                     netem: netem's own rate, no token bucket, so every message,
                     however small, crosses the link at --rate, as on a real
                     wire; needs sch_netem. tbf: in every kernel, but its bucket
                     lets a burst of up to --burst bytes through unshaped.
  --burst=BYTES      up, tbf: bucket size (default max(rate/8/HZ, 72 KiB); see below).
  --limit=BYTES      up: queue in bytes (tbf default: burst + rate x max(5ms, 2 x delay);
                     netem default: rate x max(20ms, 2 x delay), as packets of 1500 B).
  --no-downlink      up: shape only host egress, not the bridge-to-host direction.
  --host-rate=I:RATE[,I:RATE...]  up: host I's link (both directions) at RATE
                     instead of --rate: one slow (or fast) machine's NIC, for
                     straggler experiments. Same units and bounds as --rate.
  --host-cpu=I:PERCENT[,I:PERCENT...]  up, with --start-daemons: the daemons of
                     host I run in a cpu cgroup of their own capped at PERCENT
                     of one CPU (1..800; cgroup v2 cpu.max, or v1
                     cpu.cfs_quota_us): a slow or shared machine. The groups
                     (/sys/fs/cgroup[/cpu]/PREFIX-hI) are removed by down.
  --prefix=NAME      namespace prefix, [A-Za-z0-9_-], at most 32 chars (default gsnet).
  --subnet=A.B.C     up: private /24 (10/8, 172.16/12, 192.168/16; default 10.77.0).
  --start-daemons    up: start gradsync-server on h0 (\${subnet}.10:$SERVER_PORT) and
                     gradsync-worker on h1.. (listen and advertise \${subnet}.(10+i):$WORKER_PORT),
                     then wait until the server lists H-1 idle workers.
  --workers-per-host=M  up, with --start-daemons: M workers on each worker host
                     (1..8, default 1; ports $WORKER_PORT..$WORKER_PORT+M-1, ids hI-J), so
                     that ranks sharing a host form a group for --algorithm=hier.
  --ps-on-workers    up, with --start-daemons: also a PS shard (gradsync-server
                     --role=ps, \${subnet}.(10+i):$PS_PORT) on every worker host, and
                     h0 runs the coordinator only, so a job's --ps_shards=S uses
                     the shards of h1..hS (one per host, colocated as in BytePS).
  --build-dir=DIR    up: where bin/gradsync* are (default build).
  --peer-bdp-probe=true|false  up, with --start-daemons: every worker's
                     --peer_bdp_probe (gRPC's BDP probing on the streams between
                     workers; default: the workers' own, true).
  --ps-inline-bytes=B  up, with --start-daemons: the server's and every PS
                     shard's --ps_inline_bytes (pushes of at most B float32
                     bytes are summed on the gRPC thread that read them; 0:
                     all on the reduce threads; default: theirs, 64 KiB).
  --ps-reduce-threads=N  up, with --start-daemons: the server's and every PS
                     shard's --ps_reduce_threads (1..64; default: theirs, 2).
  --data-dir=DIR     up, with --start-daemons: every worker's --data_dir, the
                     Fashion-MNIST directory its training jobs read (default: the
                     workers' own, /usr/share/datasets/fashion-mnist).
  --wait=SECONDS     up: deadline for the workers to register (default 60).
  --state-dir=DIR    state files and daemon logs (default /run/gradsync-netem):
                     DIR/\${prefix}.state and DIR/\${prefix}/*.log.
  --keep-logs        down: keep DIR/\${prefix}/ (default: removed).
  -h, --help         this text.

Shaping: with --shaper=netem, each host's eth0 egress gets one netem qdisc with
rate, delay and loss. With --shaper=tbf (default), it gets tbf (rate) and, when
--delay or --loss is set, a netem root (delay, loss) with the tbf as its child. Unless --no-downlink,
the bridge port toward each host gets the same rate (tbf or netem), so a host also
receives at most --rate (a server receiving from N workers is limited like a
real NIC); delay and loss are applied once, on the sender's egress.
burst: tbf refills its bucket from a timer; rate/8/HZ bytes is what accrues in
one tick, so a smaller bucket loses throughput whenever the timer is late
(1gbit at HZ=250: 500 KB). The 72 KiB floor holds a whole 64 KiB GSO packet,
so tbf never has to re-segment one.

Exit status: 0 ok; 1 runtime failure (after tearing down what it created);
2 bad usage or refusal (namespace not ours, cluster already up);
3 this machine cannot do it (no network namespaces / CAP_NET_ADMIN, no sch_netem).
EOF
}

say() { echo "$PROG: $*" >&2; }
die() { say "error: $*"; exit 1; }
usage_error() { say "error: $*"; say "run 'bench/experiments/netem-cluster.sh --help'"; exit 2; }
unsupported() { say "cannot run here: $*"; exit 3; }

# ---------------------------------------------------------------- arguments

parse_flags() {
  local arg key val
  while (($#)); do
    arg=$1; shift
    case $arg in
      -h|--help) usage; exit 0 ;;
      --start-daemons) START_DAEMONS=1; continue ;;
      --ps-on-workers) PS_ON_WORKERS=1; continue ;;
      --no-downlink) DOWNLINK=0; continue ;;
      --keep-logs) KEEP_LOGS=1; continue ;;
      --*=*) key=${arg%%=*}; val=${arg#*=} ;;
      --*) key=$arg; (($#)) || usage_error "$key needs a value"; val=$1; shift ;;
      *) usage_error "unexpected argument '$arg'" ;;
    esac
    case $key in
      --hosts) HOSTS=$val ;;
      --rate) RATE=$val ;;
      --delay) DELAY=$val ;;
      --loss) LOSS=$val ;;
      --burst) BURST=$val ;;
      --limit) LIMIT=$val ;;
      --shaper) SHAPER=$val ;;
      --workers-per-host) WORKERS_PER_HOST=$val ;;
      --prefix) PREFIX=$val ;;
      --subnet) SUBNET=$val ;;
      --build-dir) BUILD_DIR=$val ;;
      --wait) WAIT_S=$val ;;
      --state-dir) STATE_DIR=$val ;;
      --peer-bdp-probe) PEER_BDP_PROBE=$val ;;
      --ps-inline-bytes) PS_INLINE_BYTES=$val ;;
      --ps-reduce-threads) PS_REDUCE_THREADS=$val ;;
      --data-dir) DATA_DIR=$val ;;
      --host-rate) HOST_RATES=$val ;;
      --host-cpu) HOST_CPUS=$val ;;
      *) usage_error "unknown flag '$key'" ;;
    esac
  done
}

# rate_bps RATE: bits per second (integer) or empty if RATE is not a tc rate.
rate_bps() {
  [[ $1 =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit)$ ]] || return 0
  awk -v n="${BASH_REMATCH[1]}" -v u="${BASH_REMATCH[3]}" 'BEGIN {
    m = (u == "bit") ? 1 : (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : 1e12
    printf "%.0f\n", n * m }'
}

# delay_us TIME: microseconds (integer) or empty if TIME is not us|ms|s.
delay_us() {
  [[ $1 =~ ^([0-9]+(\.[0-9]+)?)(us|ms|s)$ ]] || return 0
  awk -v n="${BASH_REMATCH[1]}" -v u="${BASH_REMATCH[3]}" 'BEGIN {
    m = (u == "us") ? 1 : (u == "ms") ? 1e3 : 1e6
    printf "%.0f\n", n * m }'
}

validate_common() {
  [[ $PREFIX =~ ^[A-Za-z0-9_-]{1,32}$ ]] ||
    usage_error "--prefix must be 1..32 of [A-Za-z0-9_-], got '$PREFIX'"
  [[ $STATE_DIR == /* ]] || STATE_DIR="$PWD/$STATE_DIR"
  STATE_FILE="$STATE_DIR/$PREFIX.state"
  LOG_DIR="$STATE_DIR/$PREFIX"
}

validate_subnet() {
  local a b c
  [[ $SUBNET =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] ||
    usage_error "--subnet must be three octets A.B.C, got '$SUBNET'"
  a=${BASH_REMATCH[1]}; b=${BASH_REMATCH[2]}; c=${BASH_REMATCH[3]}
  ((10#$b <= 255 && 10#$c <= 255)) || usage_error "--subnet: octet out of range in '$SUBNET'"
  if ! ((10#$a == 10 || (10#$a == 172 && 10#$b >= 16 && 10#$b <= 31) ||
        (10#$a == 192 && 10#$b == 168))); then
    usage_error "--subnet must be private (10/8, 172.16/12, 192.168/16), got '$SUBNET'"
  fi
  SUBNET="$((10#$a)).$((10#$b)).$((10#$c))"
}

validate_up() {
  [[ -n $HOSTS ]] || usage_error "up needs --hosts=H (2..64)"
  if ! [[ $HOSTS =~ ^[0-9]+$ ]] || ((10#$HOSTS < 2 || 10#$HOSTS > 64)); then
    usage_error "--hosts must be an integer in 2..64, got '$HOSTS'"
  fi
  HOSTS=$((10#$HOSTS))
  RATE_BPS=$(rate_bps "$RATE")
  [[ -n $RATE_BPS ]] ||
    usage_error "bad --rate '$RATE' (want e.g. 100mbit, 1gbit, 2.5gbit; units bit|kbit|mbit|gbit|tbit)"
  ((RATE_BPS >= 8000 && RATE_BPS <= 100000000000)) ||
    usage_error "--rate must be within 8kbit..100gbit, got '$RATE'"
  DELAY_US=$(delay_us "$DELAY")
  [[ -n $DELAY_US ]] || usage_error "bad --delay '$DELAY' (want e.g. 0ms, 500us, 5ms)"
  ((DELAY_US <= 10000000)) || usage_error "--delay must be at most 10s, got '$DELAY'"
  if ! [[ $LOSS =~ ^[0-9]+(\.[0-9]+)?%$ ]] || ! awk -v p="${LOSS%\%}" 'BEGIN { exit !(p <= 100) }'; then
    usage_error "bad --loss '$LOSS' (want a percentage 0%..100%, e.g. 0.1%)"
  fi
  LOSS_ON=$(awk -v p="${LOSS%\%}" 'BEGIN { print (p > 0) ? 1 : 0 }')
  [[ -z $BURST || $BURST =~ ^[1-9][0-9]*$ ]] || usage_error "--burst must be a byte count"
  [[ -z $LIMIT || $LIMIT =~ ^[1-9][0-9]*$ ]] || usage_error "--limit must be a byte count"
  [[ $WAIT_S =~ ^[1-9][0-9]*$ ]] || usage_error "--wait must be a positive number of seconds"
  [[ -z $PEER_BDP_PROBE || $PEER_BDP_PROBE == true || $PEER_BDP_PROBE == false ]] ||
    usage_error "--peer-bdp-probe must be true or false"
  [[ -z $PS_INLINE_BYTES || ( $PS_INLINE_BYTES =~ ^[0-9]+$ && $PS_INLINE_BYTES -le 1048576 ) ]] ||
    usage_error "--ps-inline-bytes must be a byte count 0..1048576"
  [[ -z $PS_REDUCE_THREADS || ( $PS_REDUCE_THREADS =~ ^[1-9][0-9]?$ && $PS_REDUCE_THREADS -le 64 ) ]] ||
    usage_error "--ps-reduce-threads must be 1..64"
  [[ -z $DATA_DIR || -d $DATA_DIR ]] || usage_error "--data-dir: no directory '$DATA_DIR'"
  [[ $SHAPER == tbf || $SHAPER == netem ]] || usage_error "--shaper must be tbf or netem, got '$SHAPER'"
  [[ $SHAPER == tbf || -z $BURST ]] || usage_error "--burst is a tbf size; --shaper=netem has no bucket"
  [[ $WORKERS_PER_HOST =~ ^[1-8]$ ]] || usage_error "--workers-per-host must be 1..8, got '$WORKERS_PER_HOST'"
  validate_host_rates
  validate_host_cpus
  validate_subnet
}

# host_index FLAG I: sets HOST_I to I as a host number (< --hosts), or a
# usage error.
host_index() {
  if ! [[ $2 =~ ^[0-9]+$ ]] || ((10#$2 >= HOSTS)); then
    usage_error "$1: host '$2' is not a host index 0..$((HOSTS - 1))"
  fi
  HOST_I=$((10#$2))
}

validate_host_rates() {
  local item i r bps items
  [[ -n $HOST_RATES ]] || return 0
  IFS=, read -r -a items <<<"$HOST_RATES"
  for item in "${items[@]}"; do
    [[ $item == *:* ]] || usage_error "--host-rate wants I:RATE[,I:RATE...], got '$item'"
    host_index --host-rate "${item%%:*}"; i=$HOST_I; r=${item#*:}
    [[ -z ${RATE_OF[$i]:-} ]] || usage_error "--host-rate: host $i given twice"
    bps=$(rate_bps "$r")
    if [[ -z $bps ]] || ((bps < 8000 || bps > 100000000000)); then
      usage_error "--host-rate: bad rate '$r' for host $i (8kbit..100gbit, e.g. 100mbit)"
    fi
    RATE_OF[$i]=$r
  done
}

validate_host_cpus() {
  local item i pct items
  [[ -n $HOST_CPUS ]] || return 0
  ((START_DAEMONS)) || usage_error "--host-cpu caps the daemons that --start-daemons starts; give both"
  IFS=, read -r -a items <<<"$HOST_CPUS"
  for item in "${items[@]}"; do
    [[ $item == *:* ]] || usage_error "--host-cpu wants I:PERCENT[,I:PERCENT...], got '$item'"
    host_index --host-cpu "${item%%:*}"; i=$HOST_I; pct=${item#*:}
    [[ -z ${CPU_OF[$i]:-} ]] || usage_error "--host-cpu: host $i given twice"
    if ! [[ $pct =~ ^[0-9]+$ ]] || ((10#$pct < 1 || 10#$pct > 800)); then
      usage_error "--host-cpu: '$pct' for host $i is not a percentage of one CPU in 1..800"
    fi
    CPU_OF[$i]=$((10#$pct))
  done
}

# ---------------------------------------------------------------- state file
#
# One line per fact, appended as soon as the thing exists, so that a tear-down
# after a crash half-way still finds everything:
#   token HEX                    random id; also in each namespace's marker
#   ns NAME                      a namespace we created
#   pid PID START NS ROLE EXE    a daemon (START: /proc/PID/stat starttime)
#   cgroup PATH                  a --host-cpu cgroup we created

state_add() { echo "$*" >>"$STATE_FILE"; }

state_get() {  # state_get KEY: the rest of every line starting with KEY
  local key rest
  [[ -f $STATE_FILE ]] || return 0
  while read -r key rest; do
    [[ $key == "$1" ]] && echo "$rest"
  done <"$STATE_FILE"
  return 0
}

# ip netns keeps its namespaces as files in /run/netns.
ns_exists() { [[ -e /run/netns/$1 ]]; }

ns_marked() {  # ns_marked NS TOKEN: NS carries our marker with TOKEN
  local line
  [[ -n $2 ]] || return 1
  line=$(ip -n "$1" -o link show dev lo 2>/dev/null) || return 1
  [[ $line == *"alias $MARK:$2"* ]]
}

our_names() {  # every namespace name this prefix can use
  local i
  echo "$PREFIX-br"
  for ((i = 0; i < 64; i++)); do echo "$PREFIX-h$i"; done
}

# ---------------------------------------------------------------- helpers

kernel_hz() {
  local hz=""
  if [[ -r /proc/config.gz ]]; then
    hz=$(zcat /proc/config.gz 2>/dev/null | awk -F= '/^CONFIG_HZ=/ {print $2}')
  fi
  if [[ -z $hz && -r /boot/config-$(uname -r) ]]; then
    hz=$(awk -F= '/^CONFIG_HZ=/ {print $2}' "/boot/config-$(uname -r)")
  fi
  echo "${hz:-250}"   # Debian's default when the config is not readable
}

host_ip() { echo "$SUBNET.$((10 + $1))"; }

proc_start() {  # proc_start PID: starttime from /proc/PID/stat (field 22)
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*) }
  awk '{print $20}' <<<"$stat"
}

pid_is() {  # pid_is PID START: PID is still the process we recorded
  [[ -n $2 && $(proc_start "$1") == "$2" ]]
}

# ---------------------------------------------------------------- shaping
#
# Shaping. Rate: tbf, always (sch_tbf is in every distribution kernel and,
# unlike netem's "rate", also limits the bridge side). Its two sizes:
#  - burst (bucket): tbf's watchdog is an hrtimer, but on a busy machine it
#    fires late; tokens accrue only up to the bucket, so the bucket must hold
#    what the link sends in one scheduler tick, rate/8/HZ (1gbit, HZ 250:
#    500 KB; 100mbit: 50 KB), or a late timer is bandwidth lost for good. Floor
#    72 KiB: a 64 KiB GSO packet must fit the bucket or tbf re-segments it.
#  - limit (queue, bytes): packets waiting for tokens. Too small and TCP sees a
#    drop every few windows and never fills the link; too large is only
#    latency under load (bufferbloat). burst + rate x max(5 ms, 2 x delay)
#    covers a bandwidth-delay product (RTT = 2 x delay) plus 5 ms of slack.
# Delay and loss: netem (no other qdisc delays packets). It is the root and
# the tbf its child (tc-netem(8)'s layout): a packet waits out the delay in
# netem's time-ordered queue, then queues in tbf for the rate. netem's limit
# counts packets, and the delay line holds rate x delay bytes, plus whatever
# tbf hands back, so it is sized from (limit + rate x delay) / 1500 x 2, at
# least 1000 (the default). With loss, GSO is limited to one segment per skb,
# because netem drops whole skbs and a 64 KiB GSO skb is ~45 wire frames.

shaper_sizes() {  # sets TBF_BURST, TBF_LIMIT, NETEM_LIMIT, SHAPE_NOTE
  local hz bytes_s q_us qbytes
  hz=$(kernel_hz)
  bytes_s=$((RATE_BPS / 8))
  if [[ $SHAPER == netem ]]; then
    q_us=$((2 * DELAY_US > 20000 ? 2 * DELAY_US : 20000))
    qbytes=${LIMIT:-$((bytes_s * q_us / 1000000))}
    NETEM_LIMIT=$(((qbytes + bytes_s * DELAY_US / 1000000) * 2 / 1500))
    ((NETEM_LIMIT >= 1000)) || NETEM_LIMIT=1000
    SHAPE_NOTE="netem rate, no bucket, limit ${NETEM_LIMIT} packets"
    return 0
  fi
  TBF_BURST=${BURST:-$(((bytes_s + hz - 1) / hz))}
  ((TBF_BURST >= 73728)) || [[ -n $BURST ]] || TBF_BURST=73728
  q_us=$((2 * DELAY_US > 5000 ? 2 * DELAY_US : 5000))
  TBF_LIMIT=${LIMIT:-$((TBF_BURST + bytes_s * q_us / 1000000))}
  NETEM_LIMIT=$(((TBF_LIMIT + bytes_s * DELAY_US / 1000000) * 2 / 1500))
  ((NETEM_LIMIT >= 1000)) || NETEM_LIMIT=1000
  SHAPE_NOTE="tbf burst ${TBF_BURST}B (HZ $hz) limit ${TBF_LIMIT}B"
}

netem_wanted() { ((DELAY_US > 0 || LOSS_ON)); }

# shape_dev NS DEV WITH_IMPAIRMENT: root qdisc(s) on DEV's egress; with
# WITH_IMPAIRMENT, --delay and --loss too (host side only).
shape_dev() {
  local ns=$1 dev=$2 impair=$3 parent=root opts=()
  if ((impair)); then
    ((DELAY_US > 0)) && opts+=(delay "${DELAY_US}us")
    ((LOSS_ON)) && opts+=(loss "$LOSS")
  fi
  if [[ $SHAPER == netem ]]; then
    tc -n "$ns" qdisc add dev "$dev" root handle 1: netem rate "$RATE" \
      ${opts[@]+"${opts[@]}"} limit "$NETEM_LIMIT"
    return 0
  fi
  if ((${#opts[@]})); then
    tc -n "$ns" qdisc add dev "$dev" root handle 1: netem "${opts[@]}" limit "$NETEM_LIMIT"
    parent="parent 1:1"
  fi
  # shellcheck disable=SC2086  # $parent is "root" or "parent 1:1"
  tc -n "$ns" qdisc add dev "$dev" $parent handle 10: tbf rate "$RATE" \
    burst "$TBF_BURST" limit "$TBF_LIMIT"
}

# The kernel may lack sch_netem (it is a module in Debian, absent in some VM
# kernels): try it on the bridge before anything depends on it.
probe_netem() {
  netem_wanted || [[ $SHAPER == netem ]] || return 0
  if ! tc -n "$PREFIX-br" qdisc add dev br0 root handle 1: netem delay 1ms 2>/dev/null; then
    say "this kernel has no sch_netem (needed for --delay/--loss/--shaper=netem); try without them"
    UP_RC=3; return 1
  fi
  tc -n "$PREFIX-br" qdisc del dev br0 root
}

# ---------------------------------------------------------------- up

new_ns() {  # new_ns NAME: create, record, mark, loopback up
  local ns=$1
  # Recorded before it exists: a signal arriving while ip runs is handled
  # only after ip returns, and the trap must then know about this one.
  CREATED_NS+=("$ns")
  state_add ns "$ns"
  if ! ip netns add "$ns" 2>/dev/null; then
    unset 'CREATED_NS[-1]'
    ns_exists "$ns" && { say "namespace $ns appeared meanwhile; not ours"; UP_RC=2; return 1; }
    say "cannot create network namespace $ns (needs root: CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    UP_RC=3; return 1
  fi
  if ! ip -n "$ns" link set dev lo alias "$MARK:$TOKEN"; then
    say "cannot configure network namespace $ns (needs CAP_NET_ADMIN)"
    UP_RC=3; return 1
  fi
  ip -n "$ns" link set dev lo up
}

make_bridge() {
  local br="$PREFIX-br"
  new_ns "$br"
  ip -n "$br" link add br0 type bridge stp_state 0
  ip -n "$br" link set dev br0 up
}

make_host() {  # make_host I
  local i=$1 ns="$PREFIX-h$1" br="$PREFIX-br"
  if [[ -n ${RATE_OF[$i]:-} ]]; then
    # This host's own rate: shape_dev and shaper_sizes see these locals
    # (bash's dynamic scope), the other hosts keep --rate's sizes.
    local RATE=${RATE_OF[$i]} RATE_BPS TBF_BURST TBF_LIMIT NETEM_LIMIT SHAPE_NOTE
    RATE_BPS=$(rate_bps "$RATE")
    shaper_sizes
  fi
  new_ns "$ns"
  # Created inside the bridge namespace with its peer put straight into the
  # host's: no interface ever exists in the root namespace, even briefly.
  ip -n "$br" link add "h$i" type veth peer name eth0 netns "$ns"
  ip -n "$br" link set dev "h$i" master br0
  if ((LOSS_ON)); then ip -n "$ns" link set dev eth0 gso_max_segs 1; fi
  ip -n "$ns" addr add "$(host_ip "$i")/24" dev eth0
  shape_dev "$ns" eth0 1
  if ((DOWNLINK)); then shape_dev "$br" "h$i" 0; fi
  ip -n "$br" link set dev "h$i" up
  ip -n "$ns" link set dev eth0 up
}

# ---------------------------------------------------------------- CPU caps
#
# --host-cpu: a cpu cgroup per capped host, made before its daemons start;
# each of them writes its own pid into the group before it execs (so it runs
# capped from its first instruction, and what it forks stays in the group).
# Recorded in the state file ("cgroup PATH") before it exists, as namespaces
# are, and removed by down once the daemons have exited.

find_cgroup_root() {  # sets CGROUP_ROOT and CGROUP_V, or says why it cannot
  if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    grep -qw cpu /sys/fs/cgroup/cgroup.controllers ||
      unsupported "--host-cpu: cgroup v2 without the cpu controller"
    grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control ||
      echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null ||
      unsupported "--host-cpu: cannot enable the cpu controller (cgroup.subtree_control)"
    CGROUP_ROOT=/sys/fs/cgroup CGROUP_V=2
  elif [[ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]]; then
    CGROUP_ROOT=/sys/fs/cgroup/cpu CGROUP_V=1
  else
    unsupported "--host-cpu: no cpu cgroup controller (cgroup v2 cpu.max or v1 cpu.cfs_quota_us)"
  fi
  [[ -w $CGROUP_ROOT ]] || unsupported "--host-cpu: $CGROUP_ROOT is not writable (needs root, not in a container)"
}

make_cgroup() {  # make_cgroup I: host I's group, capped at CPU_OF[I] % of one CPU
  local i=$1 cg="$CGROUP_ROOT/$PREFIX-h$1" quota=$((CPU_OF[$1] * 1000))
  state_add cgroup "$cg"
  mkdir "$cg" || { say "cannot make cgroup $cg"; UP_RC=3; return 1; }
  if ((CGROUP_V == 2)); then
    echo "$quota 100000" >"$cg/cpu.max"
  else
    echo 100000 >"$cg/cpu.cfs_period_us"
    echo "$quota" >"$cg/cpu.cfs_quota_us"
  fi
  say "h$i's daemons capped at ${CPU_OF[$i]}% of one CPU ($cg)"
}

remove_cgroups() {  # every recorded group of this prefix; waits for it to empty
  local cg k
  while read -r cg; do
    [[ -d $cg && $(basename "$cg") == "$PREFIX"-h* ]] || continue
    for ((k = 0; k < 50; k++)); do
      rmdir "$cg" 2>/dev/null && break
      sleep 0.1
    done
    [[ ! -d $cg ]] || say "cgroup $cg not removed (processes still in it: $(tr '\n' ' ' <"$cg/cgroup.procs"))"
  done < <(state_get cgroup)
}

start_daemon() {  # start_daemon I ROLE LOG BIN ARGS...: background in host I
  local i=$1 role=$2 log=$3 bin=$4 pid start k
  shift 4
  # No job control here, so the child is not a process-group leader: setsid
  # makes it a session leader without forking and ip netns exec execs, so $!
  # is the daemon itself (checked below through /proc/PID/exe).
  local extra=()
  [[ -z $PEER_BDP_PROBE || $bin != */gradsync-worker ]] ||
    extra+=(--peer_bdp_probe="$PEER_BDP_PROBE")
  [[ -z $PS_INLINE_BYTES || $bin != */gradsync-server ]] ||
    extra+=(--ps_inline_bytes="$PS_INLINE_BYTES")
  [[ -z $PS_REDUCE_THREADS || $bin != */gradsync-server ]] ||
    extra+=(--ps_reduce_threads="$PS_REDUCE_THREADS")
  [[ -z $DATA_DIR || $bin != */gradsync-worker ]] || extra+=(--data_dir="$DATA_DIR")
  local cap=()
  if [[ -n ${CPU_OF[$i]:-} ]]; then
    # shellcheck disable=SC2016  # $$ and $@ are the inner shell's
    cap=(sh -c 'echo $$ >"$0" && exec "$@"' "$CGROUP_ROOT/$PREFIX-h$i/cgroup.procs")
  fi
  setsid ${cap[@]+"${cap[@]}"} ip netns exec "$PREFIX-h$i" "$bin" "$@" \
    --token_file="$LOG_DIR/token" "${extra[@]}" >"$log" 2>&1 </dev/null &
  pid=$!
  STARTED_PIDS+=("$pid")
  for ((k = 0; k < 50; k++)); do
    [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$bin" ]] && break
    sleep 0.1
  done
  [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$bin" ]] ||
    { say "$role on h$i did not start; log $log:"; tail -n 20 "$log" >&2 || true; return 1; }
  start=$(proc_start "$pid")
  state_add pid "$pid" "$start" "$PREFIX-h$i" "$role" "$bin"
}

find_binaries() {  # sets BIN_DIR (absolute) or fails before anything exists
  local b
  BIN_DIR=$(cd "$BUILD_DIR/bin" 2>/dev/null && pwd -P) ||
    usage_error "--start-daemons: no $BUILD_DIR/bin (build with deploy/build.sh, or set --build-dir)"
  for b in gradsync gradsync-server gradsync-worker; do
    [[ -x $BIN_DIR/$b ]] || usage_error "--start-daemons: $BIN_DIR/$b missing (run deploy/build.sh)"
  done
}

# The cluster token of the daemons: $LOG_DIR/token, 0600, 256 random bits.
make_cluster_token() {
  (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$LOG_DIR/token")
}

start_daemons() {
  local bindir=$BIN_DIR i ip0
  ip0=$(host_ip 0)
  make_cluster_token
  # The job history lives with this cluster's logs, not in the caller's cwd.
  # The job key (docs/operations.md, Job-scoped data plane): server and PS shards only.
  local key="$LOG_DIR/job.key"
  (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$key")
  local server_flags=(--listen="$ip0:$SERVER_PORT" --advertise="$ip0:$SERVER_PORT"
                      --state_dir="$LOG_DIR/state" --job_key_file="$key")
  if ((PS_ON_WORKERS)); then
    local shards=() ip
    for ((i = 1; i < HOSTS; i++)); do
      ip=$(host_ip "$i")
      start_daemon "$i" ps "$LOG_DIR/h$i-ps.log" "$bindir/gradsync-server" \
        --role=ps --listen="$ip:$PS_PORT" --advertise="$ip:$PS_PORT" \
        --job_key_file="$key"
      shards+=("$ip:$PS_PORT")
    done
    server_flags+=(--role=coordinator --ps_shards="$(IFS=,; echo "${shards[*]}")")
  fi
  start_daemon 0 server "$LOG_DIR/h0-server.log" "$bindir/gradsync-server" \
    "${server_flags[@]}"
  local j id role addr
  for ((i = 1; i < HOSTS; i++)); do
    for ((j = 0; j < WORKERS_PER_HOST; j++)); do
      id="h$i" role=worker
      ((WORKERS_PER_HOST == 1)) || { id="h$i-$j"; role="worker$j"; }
      addr="$(host_ip "$i"):$((WORKER_PORT + j))"
      start_daemon "$i" "$role" "$LOG_DIR/h$i-$role.log" "$bindir/gradsync-worker" \
        --coordinator="$ip0:$SERVER_PORT" --id="$id" --listen="$addr" --advertise="$addr"
    done
  done
  wait_workers "$bindir/gradsync" "$ip0:$SERVER_PORT"
}

daemons_alive() {  # fails naming the first recorded daemon that has exited
  local pid start ns role exe
  while read -r pid start ns role exe; do
    pid_is "$pid" "$start" && continue
    say "$role in $ns (pid $pid) exited; log:"
    tail -n 20 "$LOG_DIR/${ns#"$PREFIX"-}-$role.log" >&2 || true
    return 1
  done < <(state_get pid)
}

wait_workers() {  # wait_workers CLI SERVER: until (H-1) x M workers are idle
  local cli=$1 server=$2 want=$(((HOSTS - 1) * WORKERS_PER_HOST)) idle=0 deadline
  deadline=$((SECONDS + WAIT_S))
  while ((SECONDS < deadline)); do
    daemons_alive
    idle=$(ip netns exec "$PREFIX-h0" "$cli" list --server="$server" --json \
      --token_file="$LOG_DIR/token" 2>/dev/null |
      grep -c '"state": "idle"' || true)
    ((idle >= want)) && { say "server $server lists $idle idle workers"; return 0; }
    sleep 0.5
  done
  say "only $idle of $want workers idle at $server after ${WAIT_S}s; logs in $LOG_DIR"
  ip netns exec "$PREFIX-h0" "$cli" list --server="$server" \
    --token_file="$LOG_DIR/token" >&2 || true
  return 1
}

on_up_exit() {
  local rc=$?
  ((UP_DONE)) && return 0
  # errexit passes on the failed command's status (ip's 2 would read as a
  # refusal): report 1 unless a refusal, 'unsupported' or a signal set it.
  if [[ -n $UP_RC ]]; then rc=$UP_RC; elif ((rc != 130 && rc != 143)); then rc=1; fi
  say "up failed (status $rc); tearing down what it created"
  teardown_created || true
  exit "$rc"
}

cmd_up() {
  local ns i
  validate_up
  if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
    unsupported "needs iproute2 (ip and tc): apt-get install iproute2"
  fi
  ((EUID == 0)) || unsupported "needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) for network namespaces"
  [[ ! -e $STATE_FILE ]] ||
    usage_error "cluster '$PREFIX' is already up ($STATE_FILE); run down first"
  for ((i = -1; i < HOSTS; i++)); do
    ns="$PREFIX-h$i"; ((i < 0)) && ns="$PREFIX-br"
    ns_exists "$ns" && usage_error "namespace $ns exists and was not created by this tool; refusing"
  done
  if ((START_DAEMONS)); then find_binaries; fi
  shaper_sizes
  mkdir -p "$STATE_DIR" "$LOG_DIR"
  TOKEN=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
  trap on_up_exit EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  { echo "# $PROG state: what 'up' created; 'down' removes exactly this"
    echo "token $TOKEN"
    echo "config hosts=$HOSTS rate=$RATE shaper=$SHAPER delay=$DELAY loss=$LOSS subnet=$SUBNET downlink=$DOWNLINK host_rate=${HOST_RATES:-none} host_cpu=${HOST_CPUS:-none}"
  } >"$STATE_FILE"
  make_bridge
  probe_netem
  for ((i = 0; i < HOSTS; i++)); do make_host "$i"; done
  say "$HOSTS hosts up: $SUBNET.10..$(host_ip $((HOSTS - 1))), rate $RATE delay $DELAY loss $LOSS ($SHAPE_NOTE)"
  if ((START_DAEMONS)); then
    if ((${#CPU_OF[@]})); then
      find_cgroup_root
      for i in "${!CPU_OF[@]}"; do make_cgroup "$i"; done
    fi
    start_daemons
  fi
  UP_DONE=1
  trap - EXIT INT TERM
  say "state $STATE_FILE; tear down with: bench/experiments/netem-cluster.sh down --prefix=$PREFIX --state-dir=$STATE_DIR"
}

# ---------------------------------------------------------------- down

# stop_procs "PID START LABEL"...: SIGTERM to all at once, up to 10 s for them
# to exit, then SIGKILL. A pid counts only while its start time still matches.
stop_procs() {
  local entry pid start label k alive
  for entry in "$@"; do
    read -r pid start label <<<"$entry"
    if pid_is "$pid" "$start"; then kill -TERM "$pid" 2>/dev/null || true; fi
  done
  for ((k = 0; k < 100; k++)); do
    alive=0
    for entry in "$@"; do
      read -r pid start label <<<"$entry"
      if pid_is "$pid" "$start"; then alive=1; fi
    done
    ((alive)) || return 0
    sleep 0.1
  done
  for entry in "$@"; do
    read -r pid start label <<<"$entry"
    if pid_is "$pid" "$start"; then
      say "$label (pid $pid) ignored SIGTERM for 10s; SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}

stop_ns_procs() {  # anything else still inside namespace NS (e.g. from 'run')
  local ns=$1 pid procs=()
  for pid in $(ip netns pids "$ns" 2>/dev/null); do
    say "stopping pid $pid ($(cat "/proc/$pid/comm" 2>/dev/null || echo '?')) still in $ns"
    procs+=("$pid $(proc_start "$pid") pid-$pid-in-$ns")
  done
  ((${#procs[@]} == 0)) || stop_procs "${procs[@]}"
}

delete_ns_list() {  # hosts first, the bridge last
  local ns
  for ns in "$@"; do
    [[ $ns == "$PREFIX-br" ]] && continue
    stop_ns_procs "$ns"; ip netns delete "$ns"
  done
  for ns in "$@"; do
    [[ $ns == "$PREFIX-br" ]] || continue
    stop_ns_procs "$ns"; ip netns delete "$ns"
  done
}

stop_recorded_daemons() {
  local pid start ns role exe procs=()
  while read -r pid start ns role exe; do
    # Same pid, same start time and same binary: still the daemon we started.
    [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$exe" ]] || continue
    procs+=("$pid $start $role-in-$ns")
  done < <(state_get pid)
  ((${#procs[@]} == 0)) || stop_procs "${procs[@]}"
}

# After a failed 'up', in the same process: what CREATED_NS lists is ours.
teardown_created() {
  local ns live=()
  stop_recorded_daemons
  for ns in "${CREATED_NS[@]}"; do ns_exists "$ns" && live+=("$ns"); done
  ((${#live[@]})) && delete_ns_list "${live[@]}"
  remove_cgroups
  rm -f "$STATE_FILE"
  rmdir "$LOG_DIR" 2>/dev/null || say "logs kept in $LOG_DIR"
  say "torn down ${#live[@]} namespaces"
}

cmd_down() {
  local token ns live=() foreign=()
  if [[ ! -f $STATE_FILE ]]; then
    while read -r ns; do ns_exists "$ns" && foreign+=("$ns"); done < <(our_names)
    ((${#foreign[@]} == 0)) && { say "nothing to do: no $STATE_FILE and no $PREFIX-* namespaces"; return 0; }
    say "refusing: ${foreign[*]} exist(s) but no state file ($STATE_FILE) records them"
    exit 2
  fi
  token=$(state_get token | head -n1)
  [[ -n $token ]] || { say "refusing: $STATE_FILE has no token line"; exit 2; }
  while read -r ns; do
    ns_exists "$ns" || continue
    if ns_marked "$ns" "$token"; then live+=("$ns"); else foreign+=("$ns"); fi
  done < <(state_get ns)
  if ((${#foreign[@]})); then
    say "refusing: ${foreign[*]} lack(s) the marker '$MARK:$token' (not created by this tool); nothing removed"
    exit 2
  fi
  stop_recorded_daemons
  ((${#live[@]})) && delete_ns_list "${live[@]}"
  remove_cgroups
  rm -f "$STATE_FILE"
  ((KEEP_LOGS)) || rm -rf -- "$LOG_DIR"
  say "down: removed ${#live[@]} namespaces of '$PREFIX'"
}

# ---------------------------------------------------------------- run, status

cmd_run() {
  local host=$1 ns token
  shift
  [[ $host =~ ^[0-9]+$ ]] || usage_error "run: HOST must be a host index (0 = server), got '$host'"
  (($#)) || usage_error "run: no command given"
  ns="$PREFIX-h$((10#$host))"
  ns_exists "$ns" || { say "no namespace $ns (is cluster '$PREFIX' up?)"; exit 1; }
  token=$(state_get token | head -n1)
  ns_marked "$ns" "$token" || { say "refusing: $ns is not one of this tool's namespaces"; exit 2; }
  # Clients inside (gradsync bench/submit/list) authenticate with the token
  # the daemons were started with.
  if [[ -r $LOG_DIR/token ]]; then
    GRADSYNC_TOKEN=$(<"$LOG_DIR/token")
    export GRADSYNC_TOKEN
  fi
  exec ip netns exec "$ns" "$@"
}

cmd_status() {
  local token ns pid start role exe dev
  [[ -f $STATE_FILE ]] || { say "no cluster '$PREFIX' ($STATE_FILE missing)"; return 1; }
  token=$(state_get token | head -n1)
  echo "cluster $PREFIX: $(state_get config)"
  while read -r ns; do
    if ! ns_exists "$ns"; then echo "$ns: MISSING"; continue; fi
    ns_marked "$ns" "$token" && echo "$ns: ok" || echo "$ns: exists but UNMARKED"
    dev=eth0; [[ $ns == "$PREFIX-br" ]] && dev=""
    if [[ -n $dev ]]; then
      ip -n "$ns" -br addr show dev "$dev" | sed 's/^/  /'
      tc -n "$ns" -s qdisc show dev "$dev" | sed 's/^/  /'
    else
      # the bridge ports' qdiscs, without br0's and lo's noqueue blocks
      tc -n "$ns" -s qdisc show | awk '/^qdisc/ { show = ($2 != "noqueue") } show' | sed 's/^/  /'
    fi
  done < <(state_get ns)
  local cg
  while read -r cg; do
    [[ -d $cg ]] || { echo "cgroup $cg: MISSING"; continue; }
    if [[ -f $cg/cpu.max ]]; then echo "cgroup $cg: cpu.max $(cat "$cg/cpu.max")"
    else echo "cgroup $cg: cpu.cfs_quota_us $(cat "$cg/cpu.cfs_quota_us") of $(cat "$cg/cpu.cfs_period_us")"; fi
  done < <(state_get cgroup)
  while read -r pid start ns role exe; do
    if pid_is "$pid" "$start"; then echo "$role in $ns: pid $pid alive"
    else echo "$role in $ns: pid $pid DEAD (log $LOG_DIR/${ns#"$PREFIX"-}-$role.log)"; fi
  done < <(state_get pid)
}

main() {
  (($#)) || { usage >&2; exit 2; }
  local cmd=$1; shift
  case $cmd in
    -h|--help|help) usage ;;
    up) parse_flags "$@"; validate_common; cmd_up ;;
    down) parse_flags "$@"; validate_common; cmd_down ;;
    status) parse_flags "$@"; validate_common; cmd_status ;;
    run)
      local flags=()   # run takes --prefix=P / --state-dir=D before HOST
      while (($#)) && [[ $1 == -* ]]; do flags+=("$1"); shift; done
      parse_flags ${flags[@]+"${flags[@]}"}; validate_common
      (($#)) || usage_error "run: HOST and CMD needed"
      cmd_run "$@" ;;
    *) usage_error "unknown command '$cmd'" ;;
  esac
}

main "$@"
