#!/bin/bash
# failover-test.sh MAPFS_GW -- a gateway dies, its clients carry on (issue 16).
#
# Two gateways of one cluster (one PostgreSQL, one file store), each in a
# network namespace of its own on one bridge, with keepalived (VRRP)
# moving the service address between them on `mapfs-gw ctl ready`.  The
# real Linux NFS client in QEMU mounts that address (through forwarders
# in the lab namespace, tests/kernel/run-in-qemu.sh), takes an NLM lock
# and appends + fsyncs one line at a time (tests/kernel/guest/failover.sh).
# Once 15 lines are in, the gateway holding the address is killed -9.
# Checked: the client goes on through the survivor (its longest
# append+fsync, the one across the kill, is printed: the target is under
# 15 s, measured, not asserted), every
# line it fsync'd is in the store's object at the end, the survivor asked
# the client to reclaim its lock (SM_NOTIFY) and the client's lockd did.
#
# Needs root (network namespaces), keepalived, socat and what the kernel
# tests need; without them it says "SKIPPED: ..." and exits 77.
set -uo pipefail
GW=${1:?mapfs-gw binary}
GW=$(cd "$(dirname "$GW")" && pwd)/$(basename "$GW")
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
KT="$ROOT/tests/kernel"
skip() { echo "SKIPPED: failover test: $*"; exit 77; }
say() { echo "failover: $*"; }

if [ -z "${FO_IN_NETNS:-}" ]; then
  [ "$(id -u)" = 0 ] || skip "needs root (network namespaces, a bridge)"
  for c in keepalived socat qemu-system-x86_64 cpio ip nsenter; do
    command -v $c >/dev/null || skip "$c is not installed"
  done
  KVER=$(ls /usr/lib/modules 2>/dev/null | sort -V | tail -1)
  [ -n "$KVER" ] && [ -r "/boot/vmlinuz-$KVER" ] || skip "no kernel in /boot (apt-get install linux-image-amd64)"
  [ -x /bin/busybox ] && file -L /bin/busybox 2>/dev/null | grep -q 'statically linked' || skip "no static /bin/busybox"
  echo 'int main(void){return 0;}' | ${CC:-cc} -static -x c -o /dev/null - 2>/dev/null || skip "no C compiler with a static libc"
  unshare -n true 2>/dev/null || skip "cannot make network namespaces here"
  # PostgreSQL in this namespace; the gateways reach it by its socket.
  WORK=$(mktemp -d /tmp/mapfs-fo.XXXXXX)
  chmod 755 "$WORK" # PostgreSQL's user reaches its directory inside
  export MAPFS_PG_WATCH_PID=$$
  eval "$("$ROOT/tests/pg/pg.sh" start "$WORK/pg")" || { rm -rf "$WORK"; exit 1; }
  export MAPFS_PG_DIR MAPFS_PG_PORT
  # The lab: a private network namespace of its own (the client's side).
  FO_IN_NETNS=1 WORK=$WORK unshare -n "$0" "$@"
  rc=$?
  "$ROOT/tests/pg/pg.sh" stop "$WORK/pg" >/dev/null 2>&1
  [ -n "${FO_KEEP:-}" ] && echo "failover: kept $WORK" || rm -rf "$WORK"
  exit $rc
fi

PIDS=() NSPIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${NSPIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
}
trap cleanup EXIT
fail() { say "FAIL: $*"; for n in a b; do echo "---- gateway $n (tail) ----"; tail -25 "$WORK/$n/gw.log"; done; exit 1; }

NET=10.77.0 VIP=10.77.0.100
ip link set lo up
ip link add br0 type bridge && ip addr add $NET.1/24 dev br0 && ip link set br0 up ||
  fail "no bridge"
# One namespace per gateway (a sleeping process holds it), on the bridge.
declare -A NSP
i=11
for n in a b; do
  unshare -n sleep 100000 & NSP[$n]=$!; NSPIDS+=($!)
  sleep 0.1
  ip link add "v$n" type veth peer name eth0 netns "${NSP[$n]}" || fail "veth $n"
  ip link set "v$n" master br0 up
  nsenter -t "${NSP[$n]}" -n sh -c "ip link set lo up; ip addr add $NET.$i/24 dev eth0; ip link set eth0 up" ||
    fail "namespace $n"
  i=$((i + 1))
done

mkdir -p "$WORK/bin" "$WORK/store"
for h in minirpcbind appendsync flock; do
  ${CC:-cc} -static -O2 -Wall -Wextra -o "$WORK/bin/$h" "$KT/helpers/$h.c" ||
    fail "building $h"
done
echo "/mapfs $NET.0/24(rw,no_root_squash,insecure)" > "$WORK/exports"
META="postgresql:///mapfs?host=$MAPFS_PG_DIR&port=$MAPFS_PG_PORT&user=mapfs"

# A gateway and its rpcbind (the client's lockd asks it for NLM's port),
# then keepalived: the address goes where `ctl ready` says yes.
start_gw() {
  local n=$1 prio=$2 p=${NSP[$1]}
  mkdir -p "$WORK/$n"
  nsenter -t $p -n "$WORK/bin/minirpcbind" -p 111 -r "$WORK/$n/rpcbind.ready" &
  PIDS+=($!)
  for _ in $(seq 50); do [ -e "$WORK/$n/rpcbind.ready" ] && break; sleep 0.1; done
  nsenter -t $p -n "$GW" --store "file://$WORK/store" --state "$WORK/$n/state" \
    --meta "$META" --node "gw-$n" --lease 3 --bind 0.0.0.0 --nfs-port 2049 \
    --mount-port 20048 --nlm-port 4001 --exports "$WORK/exports" \
    --nlm-name $VIP --nlm-client-rpcbind-port 1111 --grace 0 --upload-delay 1 \
    --threads 2 --foreground --log-level debug \
    > "$WORK/$n/out" 2> "$WORK/$n/gw.log" &
  eval "GWPID_$n=$!"; PIDS+=($!)
  for _ in $(seq 300); do grep -q ready "$WORK/$n/out" 2>/dev/null && break; sleep 0.1; done
  grep -q ready "$WORK/$n/out" || fail "gateway $n did not start"
  cat > "$WORK/$n/keepalived.conf" <<EOF
global_defs {
  script_user root
  router_id gw-$n
}
vrrp_script mapfs_ready {
  script "$GW ctl --state $WORK/$n/state ready"
  interval 1
  timeout 2
  fall 2
  rise 2
}
vrrp_instance mapfs {
  state BACKUP
  interface eth0
  virtual_router_id 77
  priority $prio
  advert_int 1
  nopreempt
  virtual_ipaddress {
    $VIP/24
  }
  track_script {
    mapfs_ready
  }
}
EOF
  nsenter -t $p -n keepalived -n -l -P -f "$WORK/$n/keepalived.conf" \
    -p "$WORK/$n/ka.pid" -r "$WORK/$n/vrrp.pid" > "$WORK/$n/keepalived.log" 2>&1 &
  PIDS+=($!)
}
has_vip() { nsenter -t "${NSP[$1]}" -n ip -4 addr show eth0 | grep -q "$VIP/"; }

start_gw a 150
start_gw b 100
for _ in $(seq 150); do has_vip a && break; sleep 0.2; done
has_vip a || fail "keepalived did not give $VIP to gateway a"
say "$VIP is on gateway a"

# The client's side: what QEMU's guest reaches as 10.0.2.2 (this
# namespace's 127.0.0.1) goes on to the service address.
for p in 2049 20048 111 4001; do
  socat TCP-LISTEN:$p,bind=127.0.0.1,fork,reuseaddr TCP:$VIP:$p 2>/dev/null &
  PIDS+=($!)
done
sleep 0.5

export KT_NFS_PORT=2049 KT_MOUNT_PORT=20048 KT_EXPORT=/mapfs
# The gateways call the client back at this namespace's address on the
# bridge: its rpcbind (1111), its lockd (4045), its statd (111).
export KT_CB_RPCBIND_PORT=1111 KT_LOCKD_PORT=4045 KT_CB_BIND=$NET.1 KT_CB_PORTS=111
export KT_FILES="$WORK/bin" KT_TIMEOUT=${FO_TIMEOUT:-240}
"$KT/run-in-qemu.sh" "$KT/guest/failover.sh" > "$WORK/guest.out" 2>&1 &
QPID=$!; PIDS+=($QPID)

# Kill the address's gateway once the client is well under way.
for _ in $(seq 1800); do
  grep -q "^done 15 " "$WORK/guest.out" 2>/dev/null && break
  kill -0 $QPID 2>/dev/null || break
  sleep 0.1
done
grep -q "^done 15 " "$WORK/guest.out" || { cat "$WORK/guest.out"; fail "the client did not get to line 15"; }
last=$(grep -c "^done " "$WORK/guest.out")
kill -9 "$GWPID_a"
say "killed gateway a (-9) after $last lines"
wait $QPID; grc=$?
cat "$WORK/guest.out"
# The guest timed each append+fsync: the longest one spans the failover.
stall=$(sed -n 's/.*the longest append+fsync: line \([0-9]*\), \([0-9.]*\) s.*/\1 \2/p' "$WORK/guest.out")
[ -n "$stall" ] || fail "the client did not finish its lines"
set -- $stall
[ "$1" -ge $((last - 1)) ] || fail "the longest wait (line $1) came before the kill (line $last)"
say "the client's longest append+fsync, across the failover: $2 s (target: under 15 s)"
has_vip b && say "$VIP is on gateway b" || fail "$VIP did not move to gateway b"
[ $grc = 0 ] || fail "the guest failed ($grc)"

# Every line fsync returned for is in the store's object.
python3 - "$WORK/store/log" 80 <<'EOF' || fail "the store's object is not what was fsync'd"
import sys
data = open(sys.argv[1], "rb").read()
n = int(sys.argv[2])
want = b""
for i in range(n):
    line = (f"line {i} of {n} ").encode()
    want += line + b"." * (63 - len(line)) + b"\n"
if data != want:
    print(f"store object: {len(data)} bytes, want {len(want)}")
    sys.exit(1)
print(f"failover: the store's object holds all {n} lines")
EOF
grep -q "asking client .* to reclaim" "$WORK/b/gw.log" ||
  fail "gateway b did not ask the client to reclaim its locks"
grep -q "lockd told" "$WORK/guest.out" ||
  fail "the client's statd did not pass the SM_NOTIFY on to its lockd"
grep -q "LOCK(reclaim)" "$WORK/b/gw.log" ||
  fail "the client did not reclaim its lock through gateway b"
say "the lock was reclaimed through gateway b"
kill -TERM "$GWPID_b"; wait "$GWPID_b" || fail "gateway b did not stop cleanly"
say "PASS"
