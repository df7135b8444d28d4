#!/usr/bin/env bash
# bench/commit_modes.sh - what a COMMIT costs in each durability mode
# (issue 16): the same small-file workload against
#   alone   one gateway, LMDB: COMMIT = on this gateway's disk
#   local   a one-node cluster, --cluster-commit local: the same
#   store   a one-node cluster, --cluster-commit store (the cluster's
#           default): COMMIT (and a FILE_SYNC WRITE) = in the store
# on the file store and, with --rgw, on a radosgw (real S3 PUTs over
# HTTP with SigV4).  Interleaved round by round; medians printed.
#
#   bench/commit_modes.sh [--rounds N] [--files N] [--size SIZE] [--rgw]
#
# mapfs-bench write-small: each of 2 client threads, 4 files in flight,
# CREATE + WRITE (UNSTABLE) + COMMIT per file of --size (default 128K).
# The per-file latency is the client's wait from CREATE to COMMIT's
# reply; files/s is the rate.  Makes no assertions.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
GW=${GW:-$ROOT/build/mapfs-gw}
BENCH=${BENCH:-$ROOT/build/bench/mapfs-bench}
ROUNDS=3 FILES=200 SIZE=128K RGW=0
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$2; shift ;;
	--files) FILES=$2; shift ;;
	--size) SIZE=$2; shift ;;
	--rgw) RGW=1 ;;
	-h|--help) sed -n '2,17p' "$0"; exit 0 ;;
	*) echo "commit_modes.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[ -x "$GW" ] && [ -x "$BENCH" ] || { echo "commit_modes.sh: build first" >&2; exit 1; }

WORK=$(mktemp -d /var/tmp/mapfs-commit.XXXXXX)
PIDS=() PGDIR= RGWDIR=
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[ -n "$PGDIR" ] && "$ROOT/tests/pg/pg.sh" stop "$PGDIR" >/dev/null 2>&1 || true
	[ -n "$RGWDIR" ] && "$ROOT/tests/s3/rgw.sh" stop "$RGWDIR" >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
eval "$(MAPFS_PG_WATCH_PID=$$ "$ROOT/tests/pg/pg.sh" start)"
PGDIR=$MAPFS_PG_DIR
STORES=file
if [ $RGW = 1 ]; then
	set -a # the gateway reads the credentials from the environment
	eval "$(MAPFS_S3_WATCH_PID=$$ "$ROOT/tests/s3/rgw.sh" start 2>/dev/null)"
	set +a
	RGWDIR=$MAPFS_S3_DIR
	STORES="file rgw"
fi

# run STORE MODE ROUND: a fresh gateway, the workload, its JSON line.
run() {
	local st=$1 mode=$2 round=$3 d=$WORK/$1-$2-$3 args
	mkdir -p "$d"
	args=(--state "$d/state" --bind 127.0.0.1 --nfs-port 0 --mount-port 0
		--no-rpcbind --foreground --threads 1 --log-level warn)
	if [ "$st" = rgw ]; then
		args+=(--store "s3://$MAPFS_S3_BUCKET/$mode-$round" --s3-endpoint "$MAPFS_S3_ENDPOINT"
			--s3-region us-east-1 --s3-path-style)
	else
		args+=(--store "file://$d/store")
	fi
	case $mode in
	local|store)
		args+=(--meta "$("$ROOT/tests/pg/pg.sh" createdb "$PGDIR" "c_${st}_${mode}_$round")"
			--node n0 --cluster-commit "$mode") ;;
	esac
	"$GW" "${args[@]}" >"$d/out" 2>"$d/err" &
	local pid=$!
	PIDS+=($pid)
	for _ in $(seq 300); do grep -q ready "$d/out" && break; sleep 0.1; done
	local nfs mnt
	nfs=$(sed -n 's/.*nfs=127.0.0.1:\([0-9]*\).*/\1/p' "$d/out")
	mnt=$(sed -n 's/.*mount=127.0.0.1:\([0-9]*\).*/\1/p' "$d/out")
	[ -n "$nfs" ] || { cat "$d/err" >&2; exit 1; }
	"$BENCH" -p 2 -q 4 --items write-small --small-file-count "$FILES" \
		--small-file-size "$SIZE" --json \
		"nfs://127.0.0.1/mapfs?nfsport=$nfs&mountport=$mnt&version=3" |
		python3 -c '
import json, sys
it = json.load(sys.stdin)["items"][0]
print(sys.argv[1], sys.argv[2], sys.argv[3], it["value"], it["latency_us"]["p50"],
      it["latency_us"]["p99"], sep="\t")' "$st" "$mode" "$round" >>"$WORK/res.tsv"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
}

for round in $(seq "$ROUNDS"); do
	for st in $STORES; do
		for mode in alone local store; do run "$st" "$mode" "$round"; done
	done
	echo "commit_modes.sh: round $round done" >&2
done
python3 - "$WORK/res.tsv" "$SIZE" "$FILES" <<'EOF'
import sys, statistics, collections
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    st, mode, rnd, val, p50, p99 = line.rstrip("\n").split("\t")
    v[(st, mode)].append((float(val), float(p50), float(p99)))
print(f"write-small: {sys.argv[3]} files of {sys.argv[2]} per thread, 2 threads x 4 in flight; "
      f"medians of {len(next(iter(v.values())))} rounds")
print("| store | COMMIT mode | files/s | per file p50 | p99 | files/s vs alone |")
print("|---|---|---|---|---|---|")
for st in ("file", "rgw"):
    if (st, "alone") not in v:
        continue
    base = statistics.median(x[0] for x in v[(st, "alone")])
    for mode, what in (("alone", "alone (LMDB), local disk"),
                       ("local", "cluster, --cluster-commit local"),
                       ("store", "cluster, --cluster-commit store")):
        rows = v[(st, mode)]
        rate = statistics.median(x[0] for x in rows)
        p50 = statistics.median(x[1] for x in rows) / 1000
        p99 = statistics.median(x[2] for x in rows) / 1000
        print(f"| {st} | {what} | {rate:,.0f} | {p50:.1f} ms | {p99:.1f} ms | {rate / base:.2f} |")
EOF
