#!/usr/bin/env bash
# bench/ab.sh - two builds of mapfs-gw side by side in one run: the rate
# items of mapfs-bench against gateway A (the head before a change) and
# gateway B (after it), for "within noise of the head before the change".
#
#   bench/ab.sh --a OLD_GW --b NEW_GW [--rounds N] [--duration S]
#               [--items LIST] [--threads N] [--keep]
#
# Each round starts a fresh gateway of each build (file store, LMDB,
# --threads 2, its own state) on 127.0.0.1 and runs every item against
# it; the build that goes first alternates from round to round (this
# VM's figures drift between rounds).  Prints the median of each item
# per build, B/A, and the spread of the rounds, and the gateway's CPU
# time per operation (from /proc: the figure the VM's drift distorts
# least).  Client and gateway share
# the machine's CPUs.  Makes no assertions.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BENCH=${BENCH:-$ROOT/build/bench/mapfs-bench}
A= B= ROUNDS=3 DURATION=3 THREADS=2 KEEP=0
ITEMS=getattr,lookup,access,rand-read-4k,rand-write-4k,seq-write-1m,create
while [ $# -gt 0 ]; do
	case $1 in
	--a) A=$2; shift ;;
	--b) B=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--duration) DURATION=$2; shift ;;
	--items) ITEMS=$2; shift ;;
	--threads) THREADS=$2; shift ;;
	--keep) KEEP=1 ;;
	-h|--help) sed -n '2,14p' "$0"; exit 0 ;;
	*) echo "ab.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[ -x "$A" ] && [ -x "$B" ] || { echo "ab.sh: --a and --b name two mapfs-gw binaries" >&2; exit 2; }
[ -x "$BENCH" ] || { echo "ab.sh: build first (cmake --build build)" >&2; exit 1; }

WORK=$(mktemp -d /var/tmp/mapfs-ab.XXXXXX)
GWPID=
cleanup() {
	if [ -n "$GWPID" ]; then kill "$GWPID" 2>/dev/null || true; wait "$GWPID" 2>/dev/null || true; fi
	[ $KEEP = 1 ] && echo "ab.sh: kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT

RES=$WORK/results.tsv
HZ=$(getconf CLK_TCK)
# The gateway's CPU time so far (user + system, clock ticks).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
: >"$RES"
# run_one LABEL BINARY ROUND: a fresh gateway, every item, stopped.
run_one() {
	local d=$WORK/$3-$1
	mkdir -p "$d/state" "$d/store"
	"$2" --state "$d/state" --store "file://$d/store" --bind 127.0.0.1 \
		--nfs-port 0 --mount-port 0 --no-rpcbind --foreground \
		--threads 2 --log-level warn >"$d/out" 2>"$d/err" &
	GWPID=$!
	for _ in $(seq 100); do grep -q ready "$d/out" && break; sleep 0.1; done
	local nfs mnt url item q v
	nfs=$(sed -n 's/.*nfs=127.0.0.1:\([0-9]*\).*/\1/p' "$d/out")
	mnt=$(sed -n 's/.*mount=127.0.0.1:\([0-9]*\).*/\1/p' "$d/out")
	[ -n "$nfs" ] || { cat "$d/err" >&2; exit 1; }
	url="nfs://127.0.0.1/mapfs?nfsport=$nfs&mountport=$mnt&version=3"
	# Depth per connection as compare.sh uses: 64 for metadata, 32 for I/O.
	for item in ${ITEMS//,/ }; do
		q=64
		case $item in *-4k|*-1m) q=32 ;; esac
		c0=$(cpu_ticks "$GWPID")
		"$BENCH" -p "$THREADS" -q "$q" --duration "$DURATION" \
			--io-file-size 64M --items "$item" --json "$url" >"$d/$item.json"
		c1=$(cpu_ticks "$GWPID")
		v=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["items"][0]["value"])' "$d/$item.json")
		printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$item" "$3" "$v" "$((c1 - c0))" >>"$RES"
	done
	kill "$GWPID"; wait "$GWPID" 2>/dev/null || true; GWPID=
}

for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then
		run_one A "$A" "$r"; run_one B "$B" "$r"
	else
		run_one B "$B" "$r"; run_one A "$A" "$r"
	fi
	echo "ab.sh: round $r of $ROUNDS done" >&2
done

python3 - "$RES" "$A" "$B" "$HZ" "$DURATION" <<'EOF'
import sys, statistics, collections
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[1]) if l.strip()]
hz, dur = float(sys.argv[4]), float(sys.argv[5])
v, cpu = collections.OrderedDict(), collections.OrderedDict()
for who, item, rnd, val, ticks in rows:
    v.setdefault(item, {}).setdefault(who, []).append(float(val))
    # the gateway's CPU microseconds per operation (per MiB for -1m)
    cpu.setdefault(item, {}).setdefault(who, []).append(
        float(ticks) / hz * 1e6 / max(float(val) * dur, 1e-9))
print(f"A = {sys.argv[2]}\nB = {sys.argv[3]}")
print('| item | A median | B median | B/A | A rounds | B rounds | gateway CPU us/op A | B | B/A |')
print('|---|---:|---:|---:|---|---|---:|---:|---:|')
for item, d in v.items():
    a, b = statistics.median(d['A']), statistics.median(d['B'])
    ca, cb = statistics.median(cpu[item]['A']), statistics.median(cpu[item]['B'])
    fmt = lambda xs: ', '.join(f'{x:,.0f}' for x in xs)
    print(f"| {item} | {a:,.0f} | {b:,.0f} | {b / a:.2f} | {fmt(d['A'])} | {fmt(d['B'])} "
          f"| {ca:.2f} | {cb:.2f} | {cb / ca:.2f} |")
EOF
