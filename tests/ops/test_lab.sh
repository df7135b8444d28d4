#!/usr/bin/env bash
# tests/ops/test_lab.sh BUILD - bench/lab.sh (issue 46) makes its machines,
# runs the calibration in them, refuses bad input with a reason, and
# `down` leaves nothing behind (namespaces, links, cgroups, mounts).  The
# calibration's verdict is the box's (exit 0 or 1), not checked here; a
# lab that cannot be made is (exit 2).  Skips (77) without root or
# network namespaces.
set -uo pipefail
BUILD=${1:?build dir}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LABSH=$ROOT/bench/lab.sh
fail() { echo "FAIL: lab: $*"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "SKIPPED: lab: needs root"; exit 77; }
unshare -n true 2>/dev/null || { echo "SKIPPED: lab: no network namespaces here"; exit 77; }
[ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ] || [ -f /sys/fs/cgroup/cgroup.controllers ] ||
	{ echo "SKIPPED: lab: no cgroup cpu controller"; exit 77; }
export LAB_DIR
LAB_DIR=$(mktemp -d /var/tmp/mapfs-labtest.XXXXXX)
rmdir "$LAB_DIR" # up makes it
export GW=$BUILD/mapfs-gw BENCH=$BUILD/bench/mapfs-bench
trap '"$LABSH" down >/dev/null 2>&1; rm -rf "$LAB_DIR"' EXIT

# Bad input: the reason, exit 2, nothing made.
out=$("$LABSH" up --gw-cpu 0 2>&1); rc=$?
[ $rc = 2 ] && grep -q "budget is cores" <<<"$out" || fail "--gw-cpu 0: rc $rc: $out"
out=$("$LABSH" up --gateways 0 2>&1); rc=$?
[ $rc = 2 ] && grep -q "gateways" <<<"$out" || fail "--gateways 0: rc $rc: $out"
out=$("$LABSH" status 2>&1); rc=$?
[ $rc = 2 ] && grep -q "no lab is up" <<<"$out" || fail "status without a lab: rc $rc: $out"
! ip netns list | grep -q '^mlab-' || fail "bad input left namespaces"

out=$("$LABSH" up --gateways 2 --disk-mb 128 2>&1) || fail "up: $out"
grep -q '^LAB budgets gw_cpu=0.3 ' <<<"$out" || fail "up printed no budgets: $out"
out=$("$LABSH" up --gateways 2 2>&1); rc=$?
[ $rc = 2 ] && grep -q "up already" <<<"$out" || fail "a second up: rc $rc: $out"
st=$("$LABSH" status) || fail "status"
[ "$(grep -cE '^(gw|c|pg|s3)' <<<"$st")" = 7 ] || fail "status: $st"
# A machine reaches another through the bridge, inside its budget.
"$LABSH" exec c1 bash -c '[ "$(ip -4 -o addr show eth0 | grep -c 10.79.0.101/)" = 1 ]' ||
	fail "c1 has not its address"

out=$("$LABSH" calibrate --max 2 --rounds 1 --files 300 2>&1); rc=$?
[ $rc = 0 ] || [ $rc = 1 ] || fail "calibrate: rc $rc: $out"
for n in 1 2; do
	grep -qE "^LAB cfg=solo$n item=create round=1 rate=[1-9][0-9]* gw_cpu_us=[0-9]+ gw_busy=[0-9.]+ cl_busy=[0-9.]+$" <<<"$out" ||
		fail "calibrate printed no solo$n line: $out"
done
grep -qE "^LAB calibration (passed|FAILED)" <<<"$out" || fail "no verdict: $out"
echo "$out" | grep '^LAB'
st=$("$LABSH" status)
[ -z "$(awk '$1 ~ /^gw/ && $4 != 0' <<<"$st")" ] || fail "gateways left running: $st"

# A one-gateway cluster: PostgreSQL in its machine with a synchronous
# standby in another, the gateway reaching it over the bridge.
if [ -x /usr/lib/postgresql/15/bin/initdb ]; then
	out=$("$LABSH" scale --configs pg1 --rounds 1 --files 200 2>&1) || fail "scale pg1: $out"
	grep -qE "^LAB cfg=pg1 item=create round=1 rate=[1-9][0-9]* gw_cpu_us=[0-9]+ pg_cpu_us=[1-9][0-9]* gw_busy=[0-9.]+ pg_busy=[0-9.]+ cl_busy=[0-9.]+$" <<<"$out" ||
		fail "scale printed no pg1 line: $out"
	echo "$out" | grep '^LAB cfg'
	st=$("$LABSH" status)
	[ -z "$(awk '($1 == "pg" || $1 == "pgs") && $4 != 0' <<<"$st")" ] || fail "PostgreSQL left running: $st"
else
	echo "lab: no PostgreSQL 15 here: the cluster's run not tried"
fi

"$LABSH" down >/dev/null || fail "down"
! ip netns list | grep -q '^mlab-' || fail "down left namespaces"
! ip link show mlabbr0 >/dev/null 2>&1 || fail "down left the bridge"
[ ! -d /sys/fs/cgroup/cpu/mapfs-lab ] && [ ! -d /sys/fs/cgroup/mapfs-lab ] || fail "down left cgroups"
! grep -q "$LAB_DIR" /proc/mounts || fail "down left mounts"
echo "lab: ok"
