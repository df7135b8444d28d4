#!/usr/bin/env bash
# bench/stress_nospc.sh - the full-cache-disk path, again and again
# (issue 17, item 5): acknowledged bytes must read back as written.
#
#   bench/stress_nospc.sh [--runs N] [--parallel P] [--build DIR]
#
# Runs tests/e2e/test_e2e_nospc (a gateway whose state lives on a 16 MiB
# tmpfs; files committed, then one written until the disk refuses, then
# every acknowledged byte checked through NFS and in the store) N times,
# P at once, so that gateways, uploads, eviction and the checks compete
# for the CPUs.  Use an ASan build (--build build-asan) to catch memory
# errors too.  The log of every failed run is kept; prints the tally.
# Exit 0 when every run passed, 1 when one failed, 77 when the test
# cannot run here (not root: it mounts a tmpfs).
#
# CI runs a short version (ctest stress/nospc); for hours:
#   bench/stress_nospc.sh --runs 5000 --parallel 3 --build build-asan
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
RUNS=100 PAR=2 BUILD=$ROOT/build
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=$2; shift ;;
	--parallel) PAR=$2; shift ;;
	--build) BUILD=$2; shift ;;
	-h|--help) sed -n '2,18p' "$0"; exit 0 ;;
	*) echo "stress_nospc.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
TEST=$BUILD/tests/test_e2e_nospc
export MAPFS_GW=${MAPFS_GW:-$BUILD/mapfs-gw} MAPFS_E2E_STORE=file
[ -x "$TEST" ] && [ -x "$MAPFS_GW" ] ||
	{ echo "stress_nospc.sh: build $TEST and $MAPFS_GW first" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "SKIPPED: needs root (mounts a tmpfs)"; exit 77; }
LOGS=$(mktemp -d /tmp/stress-nospc.XXXXXX)
pass=0 fail=0 skip=0 started=$(date +%s)

one() { # run number -> exit status of the test; its log in $LOGS/run-N.log
	"$TEST" > "$LOGS/run-$1.log" 2>&1
}

reap() { # run number, its exit status: tally it
	case $2 in
	0) pass=$((pass + 1)); rm -f "$LOGS/run-$1.log" ;;
	77) skip=$((skip + 1)) ;;
	*) fail=$((fail + 1)); echo "run $1 failed ($2): $LOGS/run-$1.log" ;;
	esac
}

declare -A pids=()
for ((i = 1; i <= RUNS; i++)); do
	while [ ${#pids[@]} -ge "$PAR" ]; do
		for n in "${!pids[@]}"; do
			kill -0 "${pids[$n]}" 2>/dev/null && continue
			wait "${pids[$n]}"
			reap "$n" $?
			unset "pids[$n]"
		done
		[ ${#pids[@]} -ge "$PAR" ] && sleep 0.1
	done
	one "$i" &
	pids[$i]=$!
done
for n in "${!pids[@]}"; do
	wait "${pids[$n]}"
	reap "$n" $?
done
echo "stress_nospc: $RUNS runs, $PAR at once, $((pass)) passed, $fail failed," \
	"$skip skipped, $(($(date +%s) - started)) s ($BUILD)"
[ "$fail" = 0 ] || exit 1
[ "$pass" -gt 0 ] || exit 77
rmdir "$LOGS" 2>/dev/null
exit 0
