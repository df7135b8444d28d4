#!/usr/bin/env bash
# tests/ops/test_ops.sh - issue 7's "Done when", end to end:
#   1. install into a temp DESTDIR and validate the unit (systemd-analyze
#      verify) and the sample configuration (--check-config, and a bad
#      one refused with exit 2); every --help option is in the sample;
#   2. start the installed gateway from a config file;
#   3. NFS I/O with libnfs-utils; the metrics move with it;
#   4. ctl: refresh shows objects put behind the gateway's back, warm
#      fills the cache (status and the cache-bytes metric before/after),
#      evict empties it, a bad path fails.
#
# usage: test_ops.sh BUILD_DIR     (needs systemd-analyze, curl, nfs-cp,
#                                    nfs-cat: ./dev installs them)
set -euo pipefail

BUILD=$(cd "$1" && pwd)
T=$(mktemp -d /tmp/mapfs-ops.XXXXXX)
GW_PID=
NOTIFY_PID=
cleanup() {
	if [ -n "$GW_PID" ] && kill -0 "$GW_PID" 2>/dev/null; then
		kill -TERM "$GW_PID"
		wait "$GW_PID" || true
	fi
	if [ -n "$NOTIFY_PID" ]; then
		kill "$NOTIFY_PID" 2>/dev/null || true
		wait "$NOTIFY_PID" 2>/dev/null || true
	fi
	rm -rf "$T"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	[ -f "$T/gw.err" ] && { echo "--- gateway stderr:" >&2; cat "$T/gw.err" >&2; }
	exit 1
}
step() { echo "== $*"; }

for tool in systemd-analyze curl nfs-cp nfs-cat nfs-ls python3; do
	command -v "$tool" >/dev/null || fail "$tool is missing (./dev installs it)"
done

step "install into DESTDIR=$T/root, prefix /usr"
DESTDIR="$T/root" cmake --install "$BUILD" --prefix /usr >"$T/install.log"
R="$T/root"
for f in usr/sbin/mapfs-gw usr/lib/systemd/system/mapfs-gw.service \
	etc/mapfs-gw/mapfs-gw.conf etc/mapfs-gw/exports \
	usr/lib/sysusers.d/mapfs-gw.conf \
	usr/share/mapfs-gw/prometheus/mapfs-gw-alerts.yml \
	usr/share/mapfs-gw/grafana/mapfs-gw.json; do
	[ -e "$R/$f" ] || fail "install did not create /$f"
done
[ -x "$R/usr/sbin/mapfs-gw" ] || fail "/usr/sbin/mapfs-gw is not executable"
GW="$R/usr/sbin/mapfs-gw"
UNIT="$R/usr/lib/systemd/system/mapfs-gw.service"
grep -qx 'ExecStart=/usr/sbin/mapfs-gw --config /etc/mapfs-gw/mapfs-gw.conf --foreground' "$UNIT" ||
	fail "the unit does not start the installed binary from the installed config"
grep -qx 'Type=notify' "$UNIT" || fail "the unit is not Type=notify"

step "systemd-analyze verify"
# verify checks that ExecStart's binary exists; it lies under DESTDIR
# until the tree is really installed, so verify a copy that names it
# there (--root would also look for systemd's own targets in the tree).
mkdir -p "$T/verify"
sed "s|/usr/sbin/mapfs-gw|$GW|g" "$UNIT" >"$T/verify/mapfs-gw.service"
systemd-analyze verify "$T/verify/mapfs-gw.service" >"$T/verify.log" 2>&1 ||
	{ cat "$T/verify.log" >&2; fail "systemd-analyze verify"; }
[ ! -s "$T/verify.log" ] || { cat "$T/verify.log" >&2; fail "systemd-analyze verify is not clean"; }

step "the sample config has every option, and --check-config"
for opt in $("$GW" --help | sed -n 's/^  --\([a-z0-9-]*\).*/\1/p'); do
	case $opt in config | check-config | help | version) continue ;; esac
	grep -Eq "^#? ?$opt =" "$R/etc/mapfs-gw/mapfs-gw.conf" ||
		fail "option --$opt is not in the sample mapfs-gw.conf"
done
"$GW" --check-config --config "$R/etc/mapfs-gw/mapfs-gw.conf" \
	--exports "$R/etc/mapfs-gw/exports" >"$T/check.out" ||
	fail "--check-config refuses the sample configuration"
grep -q 'configuration is valid' "$T/check.out" || fail "--check-config said nothing"
printf '[mapfs-gw]\nnfs-port = 99999\n' >"$T/bad.conf"
rc=0
"$GW" --check-config --config "$T/bad.conf" 2>"$T/bad.err" || rc=$?
[ "$rc" -eq 2 ] || fail "--check-config of a bad file exited $rc, want 2"
grep -q "nfs-port" "$T/bad.err" || fail "--check-config did not name the bad option"
rc=0
"$GW" --check-config --metrics nonsense 2>"$T/bad.err" || rc=$?
[ "$rc" -eq 2 ] || fail "--check-config of a bad --metrics exited $rc, want 2"
# Safe by default: the sample exports nothing, and a named exports file
# that is missing (a typo) stops the gateway instead of opening it up.
"$GW" --check-config --exports "$R/etc/mapfs-gw/exports" 2>"$T/check.err" >/dev/null ||
	fail "--check-config refuses the sample exports file"
grep -q 'exports nothing' "$T/check.err" || fail "the sample exports file exports something"
rc=0
"$GW" --check-config --exports "$T/no-such-exports" 2>"$T/bad.err" || rc=$?
[ "$rc" -eq 2 ] || fail "a missing --exports file exited $rc, want 2"
grep -q "no-such-exports" "$T/bad.err" || fail "the missing exports file is not named"

step "start the installed gateway from a config file, as systemd would"
# systemd's side of sd_notify: a datagram socket that logs each message.
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a") as f:
    while True:
        f.write(s.recv(4096).decode() + "\n")
        f.flush()
' "$T/notify.sock" "$T/notify.log" &
NOTIFY_PID=$!
for _ in $(seq 50); do [ -S "$T/notify.sock" ] && break; sleep 0.1; done
# The sample, with the test's state and free ports on loopback.
sed -e "s|^store = .*|store = file://$T/state/store|" \
	-e "s|^state = .*|state = $T/state|" \
	-e "s|^exports = .*|exports = $T/exports|" \
	-e "s|^bind = .*|bind = 127.0.0.1|" \
	-e "s|^nfs-port = .*|nfs-port = 0|" \
	-e "s|^mount-port = .*|mount-port = 0|" \
	-e "s|^# metrics = .*|metrics = 127.0.0.1:0|" \
	-e "s|^# no-rpcbind = .*|no-rpcbind = true|" \
	-e "s|^# threads = .*|threads = 2|" \
	-e "s|^# dir-ttl = .*|dir-ttl = 600|" \
	"$R/etc/mapfs-gw/mapfs-gw.conf" >"$T/gw.conf"
echo "/mapfs 127.0.0.1(rw,no_root_squash,insecure)" >"$T/exports"
mkdir -p "$T/state"
NOTIFY_SOCKET="$T/notify.sock" WATCHDOG_USEC=400000 \
	"$GW" --config "$T/gw.conf" --foreground >"$T/gw.out" 2>"$T/gw.err" &
GW_PID=$!
for _ in $(seq 100); do
	grep -q 'ready' "$T/gw.out" 2>/dev/null && break
	kill -0 "$GW_PID" 2>/dev/null || fail "the gateway exited before it was ready"
	sleep 0.1
done
READY=$(head -1 "$T/gw.out")
NFS=$(sed -n 's/.* nfs=127\.0\.0\.1:\([0-9]*\) .*/\1/p' <<<"$READY")
MNT=$(sed -n 's/.* mount=127\.0\.0\.1:\([0-9]*\) .*/\1/p' <<<"$READY")
MET=$(sed -n 's/.* metrics=\([0-9.:]*\)$/\1/p' <<<"$READY")
[ -n "$NFS" ] && [ -n "$MNT" ] && [ -n "$MET" ] || fail "bad ready line: $READY"
URL="nfs://127.0.0.1/mapfs"
Q="?nfsport=$NFS&mountport=$MNT&version=3"
ctl() { "$GW" ctl --state "$T/state" "$@"; }

scrape() { curl -sf "http://$MET/metrics" >"$T/metrics.$1" || fail "scrape $1"; }
metric() { # FILE NAME{LABELS}: its value, 0 if absent
	awk -v n="$2" '$1 == n { v = $2 } END { print v + 0 }' "$T/metrics.$1"
}
grew() { # NAME{LABELS}: the value went up between the scrapes a and b
	local a b
	a=$(metric a "$1")
	b=$(metric b "$1")
	awk -v a="$a" -v b="$b" 'BEGIN { exit !(b > a) }' ||
		fail "$1 did not grow with traffic ($a -> $b)"
	echo "   $1: $a -> $b"
}

step "metrics move with NFS traffic"
scrape a
grep -q '^# TYPE mapfs_rpc_duration_seconds histogram' "$T/metrics.a" ||
	fail "no RPC latency histogram in the metrics"
head -c 1048576 /dev/urandom >"$T/data"
nfs-cp "$T/data" "$URL/data$Q" >/dev/null || fail "nfs-cp to the gateway"
nfs-cat "$URL/data$Q" >"$T/back" || fail "nfs-cat from the gateway"
cmp -s "$T/data" "$T/back" || fail "read back different bytes"
scrape b
grew 'mapfs_rpc_calls_total{program="nfs",proc="WRITE"}'
grew 'mapfs_rpc_calls_total{program="nfs",proc="READ"}'
grew 'mapfs_rpc_duration_seconds_count{program="nfs",proc="WRITE"}'
grew 'mapfs_rpc_calls_total{program="mount",proc="MNT"}'
grew 'mapfs_nfs_bytes_total{dir="write"}'
grew 'mapfs_nfs_bytes_total{dir="read"}'
grew 'mapfs_connections_accepted_total'
grew 'mapfs_cache_reads_total{result="hit"}'
grep -q 'mount /mapfs by 127.0.0.1 port' "$T/gw.err" || fail "no mount line in the log"

step "ctl status, flush, clients"
ctl status >"$T/status.0" || fail "ctl status"
grep -q '^store: ok' "$T/status.0" || fail "ctl status: store not ok"
grep -q '^uptime_seconds: ' "$T/status.0" || fail "ctl status: no uptime"
"$GW" flush --state "$T/state" >/dev/null || fail "mapfs-gw flush"
[ -f "$T/state/store/data" ] || fail "flush did not put the file in the store"
ctl clients | grep -q ' /mapfs$' || fail "ctl clients does not list the mount"

step "refresh shows objects put behind the gateway's back; warm fills the cache"
# The root was listed by the I/O above and dir-ttl is 600 s: an object
# put into the store now stays unseen until a refresh.
echo behind >"$T/state/store/behind"
nfs-ls "$URL/$Q" | grep -q ' behind$' && fail "the listing was not cached (test is void)"
"$GW" refresh --state "$T/state" /mapfs >/dev/null || fail "mapfs-gw refresh /mapfs"
nfs-ls "$URL/$Q" | grep -q ' behind$' || fail "refresh did not make the new object visible"
mkdir -p "$T/state/store/cold/deep"
for i in 1 2 3; do head -c 524288 /dev/urandom >"$T/state/store/cold/f$i"; done
head -c 2097152 /dev/urandom >"$T/state/store/cold/deep/big"
"$GW" refresh --state "$T/state" /mapfs/cold >/dev/null || fail "mapfs-gw refresh"
ctl status >"$T/status.1"
scrape a
ctl warm /mapfs/cold >"$T/warm.out" || fail "ctl warm"
grep -q 'warmed /mapfs/cold: 4 files, 4 fetched' "$T/warm.out" ||
	fail "ctl warm did not fetch the 4 files: $(cat "$T/warm.out")"
ctl status >"$T/status.2"
scrape b
c1=$(sed -n 's/^cache_bytes: \([0-9]*\).*/\1/p' "$T/status.1")
c2=$(sed -n 's/^cache_bytes: \([0-9]*\).*/\1/p' "$T/status.2")
echo "   ctl status cache_bytes: $c1 -> $c2"
[ $((c2 - c1)) -ge $((3 * 524288 + 2097152)) ] ||
	fail "the cache did not fill by the warmed bytes ($c1 -> $c2)"
grew 'mapfs_cache_bytes'
grew 'mapfs_cache_fetches_total'
grew 'mapfs_store_requests_total{op="get"}'
nfs-cat "$URL/cold/deep/big$Q" | cmp -s - "$T/state/store/cold/deep/big" ||
	fail "a warmed file reads back different bytes"

step "evict empties it again; errors are errors"
ctl evict /mapfs/cold >/dev/null || fail "ctl evict"
ctl status >"$T/status.3"
c3=$(sed -n 's/^cache_bytes: \([0-9]*\).*/\1/p' "$T/status.3")
echo "   ctl status cache_bytes after evict: $c3"
[ "$c3" -le "$c1" ] || fail "evict left the cache at $c3 bytes (was $c1 before warm)"
rc=0
ctl warm /elsewhere 2>/dev/null || rc=$?
[ "$rc" -eq 1 ] || fail "ctl warm of a path outside the export exited $rc, want 1"
rc=0
ctl refresh /mapfs/no/such/dir 2>/dev/null || rc=$?
[ "$rc" -eq 1 ] || fail "ctl refresh of a missing path exited $rc, want 1"

step "SIGTERM stops it cleanly"
kill -TERM "$GW_PID"
wait "$GW_PID" || fail "the gateway exited non-zero on SIGTERM"
GW_PID=
[ ! -e "$T/state/ctl.sock" ] || fail "the control socket was left behind"
grep -q '^READY=1' "$T/notify.log" || fail "no READY=1 to systemd"
grep -q '^WATCHDOG=1' "$T/notify.log" || fail "no WATCHDOG=1 pings with WATCHDOG_USEC set"
grep -q '^STOPPING=1' "$T/notify.log" || fail "no STOPPING=1 on SIGTERM"
echo "ok"
