#!/usr/bin/env bash
# bench/cluster_warm.sh - warm LOOKUP and GETATTR: one gateway on LMDB
# beside one on PostgreSQL (a one-node cluster), both at rest, measured
# in turn round by round (this VM's figures drift between rounds).
#
#   bench/cluster_warm.sh [--rounds N] [--duration S] [--threads N]
#
# Both gateways run for the whole run (--threads 1, fresh state, a file
# store each); mapfs-bench's lookup and getattr items hit one file per
# client thread.  Reads never reach PostgreSQL (the replica in LMDB
# answers), so the ratio says what the cluster costs a warm read; unlike
# bench/cluster.sh, no creates or uploads run before or beside it.
# Prints each round and the medians.  Makes no assertions.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
GW=${GW:-$ROOT/build/mapfs-gw}
BENCH=${BENCH:-$ROOT/build/bench/mapfs-bench}
ROUNDS=5 DURATION=3 THREADS=3
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$2; shift ;;
	--duration) DURATION=$2; shift ;;
	--threads) THREADS=$2; shift ;;
	-h|--help) sed -n '2,13p' "$0"; exit 0 ;;
	*) echo "cluster_warm.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[ -x "$GW" ] && [ -x "$BENCH" ] || { echo "cluster_warm.sh: build first" >&2; exit 1; }

WORK=$(mktemp -d /var/tmp/mapfs-warm.XXXXXX)
PIDS=()
PGDIR=
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[ -n "$PGDIR" ] && "$ROOT/tests/pg/pg.sh" stop "$PGDIR" >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
eval "$(MAPFS_PG_WATCH_PID=$$ "$ROOT/tests/pg/pg.sh" start)"
PGDIR=$MAPFS_PG_DIR

declare -A URL
start_gw() { # NAME [gateway options...]
	local d=$WORK/$1
	shift
	mkdir -p "$d"
	"$GW" --state "$d/state" --store "file://$d/store" --bind 127.0.0.1 \
		--nfs-port 0 --mount-port 0 --no-rpcbind --foreground --threads 1 \
		--log-level warn "$@" >"$d/out" 2>"$d/err" &
	PIDS+=($!)
	for _ in $(seq 300); do grep -q ready "$d/out" && break; sleep 0.1; done
	local nfs mnt
	nfs=$(sed -n 's/.*nfs=127.0.0.1:\([0-9]*\).*/\1/p' "$d/out")
	mnt=$(sed -n 's/.*mount=127.0.0.1:\([0-9]*\).*/\1/p' "$d/out")
	[ -n "$nfs" ] || { cat "$d/err" >&2; exit 1; }
	URL[$(basename "$d")]="nfs://127.0.0.1/mapfs?nfsport=$nfs&mountport=$mnt&version=3"
}
start_gw lmdb
start_gw pg --meta "$("$ROOT/tests/pg/pg.sh" createdb "$PGDIR" warm)" --node n0

RES=$WORK/res.tsv
for round in $(seq "$ROUNDS"); do
	for cfg in lmdb pg; do
		"$BENCH" -p "$THREADS" -q 16 --duration "$DURATION" --items lookup,getattr \
			--json "${URL[$cfg]}" | python3 -c '
import json, sys
for it in json.load(sys.stdin)["items"]:
    print(sys.argv[1], sys.argv[2], it["name"], it["value"], sep="\t")' "$cfg" "$round" >>"$RES"
	done
	echo "cluster_warm.sh: round $round done" >&2
done
python3 - "$RES" "$THREADS" <<'EOF'
import sys, statistics, collections
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    cfg, rnd, item, val = line.split("\t")
    v[(item, cfg)].append(float(val))
print(f"warm reads, {sys.argv[2]} client threads, one gateway each, medians of {len(v[('lookup', 'lmdb')])} rounds (each round: lmdb, then pg)")
print("| item | lmdb | pg | pg/lmdb | rounds (lmdb / pg) |")
print("|---|---|---|---|---|")
for item in ("lookup", "getattr"):
    a, b = v[(item, "lmdb")], v[(item, "pg")]
    ma, mb = statistics.median(a), statistics.median(b)
    rounds = ", ".join(f"{x/1000:.0f}k/{y/1000:.0f}k" for x, y in zip(a, b))
    print(f"| {item} (ops/s) | {ma:,.0f} | {mb:,.0f} | {mb/ma:.2f} | {rounds} |")
EOF
