#!/usr/bin/env bash
# bench/flushes.sh - what a small-file load costs in disk flushes, two
# builds side by side (issue 36).
#
#   bench/flushes.sh --a OLD_GW --b NEW_GW [--dir DIR] [--rounds N]
#                    [-- mapfs-bench options]
#
# Each round starts a fresh gateway of each build (file store, LMDB,
# state under DIR: put it on the disk to measure, e.g. ext4 with a
# journal), runs mapfs-bench against it (default: -q 16 --items
# write-small --small-file-count 1500) and prints the rates with the
# gateway's own counters over the run: LMDB commits, flushes by kind
# (mapfs_disk_flushes_total) and CPU.  The build that goes first
# alternates.  Makes no assertions.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/build/bench/mapfs-bench
A= B= DIR=/var/tmp ROUNDS=3
while [ $# -gt 0 ]; do
	case $1 in
	--a) A=$2; shift ;;
	--b) B=$2; shift ;;
	--dir) DIR=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--) shift; break ;;
	-h|--help) sed -n '2,14p' "$0"; exit 0 ;;
	*) echo "flushes.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[ -x "$A" ] && [ -x "$B" ] || { echo "flushes.sh: --a and --b name two mapfs-gw binaries" >&2; exit 2; }
[ -x "$BENCH" ] || { echo "flushes.sh: build first (cmake --build build)" >&2; exit 1; }
[ $# -gt 0 ] || set -- -q 16 --items write-small --small-file-count 1500 --keep

GPID= GDIR=
# A run that stops half way leaves no gateway and no work dir behind.
trap '[ -n "$GPID" ] && kill "$GPID" 2>/dev/null; [ -n "$GDIR" ] && rm -rf "$GDIR"' EXIT

counters() { # METRICS_ADDR
	curl -s "http://$1/metrics" |
		awk '/^mapfs_db_commits_total /{c=$2} /^mapfs_disk_flushes_total\{kind="file"\}/{f=$2}
		     /^mapfs_disk_flushes_total\{kind="dir"\}/{d=$2} /^mapfs_disk_flushes_total\{kind="db"\}/{b=$2}
		     END{print c+0, f+0, d+0, b+0}'
}

run_one() { # LABEL GW [mapfs-bench options]
	local label=$1 gw=$2 w pid out np mp mt c0 c1 t0 t1
	shift 2
	w=$(mktemp -d "$DIR/mapfs-flushes.XXXXXX")
	"$gw" --state "$w/state" --store "file://$w/store" --bind 127.0.0.1 \
		--nfs-port 0 --mount-port 0 --no-rpcbind --foreground \
		--metrics 127.0.0.1:0 >"$w/out" 2>"$w/err" &
	pid=$!
	GPID=$pid GDIR=$w
	for _ in $(seq 100); do grep -q ready "$w/out" 2>/dev/null && break; sleep 0.1; done
	np=$(grep -o 'nfs=[0-9.]*:[0-9]*' "$w/out" | cut -d: -f2)
	mp=$(grep -o 'mount=[0-9.]*:[0-9]*' "$w/out" | cut -d: -f2)
	mt=$(grep -o 'metrics=[0-9.]*:[0-9]*' "$w/out" | cut -d= -f2)
	read -r c0 < <(counters "$mt"; true)
	local cpu0 cpu1
	cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	t0=$(date +%s%N)
	out=$("$BENCH" "$@" "nfs://127.0.0.1/mapfs?nfsport=$np&mountport=$mp&version=3" 2>&1 |
		grep -E '^\| *[A-Z]' | grep -v ITEM |
		awk -F'|' '{gsub(/ +/," ",$2); gsub(/ +/," ",$3); printf "%s:%s;", $2, $3}' || true)
	t1=$(date +%s%N)
	cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	read -r c1 < <(counters "$mt"; true)
	kill "$pid"; wait "$pid" 2>/dev/null || true
	rm -rf "$w"
	GPID= GDIR=
	# shellcheck disable=SC2086
	set -- $c0 $c1
	printf '%s\t%s\tcommits %d, flushes file %d dir %d db %d, gateway CPU %d ms in %d ms\n' \
		"$label" "$out" $(($5 - $1)) $(($6 - $2)) $(($7 - $3)) $(($8 - $4)) \
		$(((cpu1 - cpu0) * 1000 / $(getconf CLK_TCK))) $(((t1 - t0) / 1000000))
}

for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then order="a b"; else order="b a"; fi
	for x in $order; do
		if [ $x = a ]; then run_one "round $r A" "$A" "$@"
		else run_one "round $r B" "$B" "$@"; fi
	done
done
