#!/usr/bin/env bash
# tests/e2e/volume.sh GW BENCH - one gateway on a real S3 server past
# 20,000 uploads in its life (issue 50), the way a user copying a dataset
# in does it: many small files through NFS, then `mapfs-gw flush`.
#
# Before the fix every thread that read kept an LMDB reader slot until
# the gateway stopped; the syncer starts threads for each pass of
# parallel uploads, so after ~16,300 uploads every read failed: uploads
# stopped, flush failed at once ("Resource temporarily unavailable") and
# the log's checkpoint gave the log up.  Here: two rounds of 10,500 files
# of 1 KiB, each flushed; every file is an object in the bucket; the
# process's resources (reader slots, threads, descriptors) back at their
# level afterwards; the log still on.
#
# Run under tests/s3/with-server.sh (MAPFS_S3_ENDPOINT etc.).  Needs
# python3-boto3 (./dev installs it) to count the bucket's keys.
set -euo pipefail
GW=$1
BENCH=$2
T=$(mktemp -d /tmp/mapfs-volume.XXXXXX)
PID=
cleanup() {
	if [ -n "$PID" ]; then
		kill -TERM "$PID" 2>/dev/null || true
		wait "$PID" 2>/dev/null || true
	fi
	rm -rf "$T"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	[ -f "$T/gw.err" ] && tail -20 "$T/gw.err" >&2
	exit 1
}
step() { echo "== $(date +%T) $*"; }

PREFIX=vol$$
"$GW" --state "$T/state" --store "s3://$MAPFS_S3_BUCKET/$PREFIX" \
	--s3-endpoint "$MAPFS_S3_ENDPOINT" --s3-path-style --upload-delay 0 \
	--nfs-port 0 --mount-port 0 --nlm-port 0 --no-rpcbind --foreground \
	--metrics 127.0.0.1:0 >"$T/gw.out" 2>"$T/gw.err" &
PID=$!
for _ in $(seq 200); do
	grep -q ready "$T/gw.out" 2>/dev/null && break
	kill -0 "$PID" 2>/dev/null || fail "the gateway did not start"
	sleep 0.1
done
NFS=$(sed -n 's/.*nfs=[^ ]*:\([0-9]*\) .*/\1/p' "$T/gw.out")
MNT=$(sed -n 's/.*mount=[^ ]*:\([0-9]*\) .*/\1/p' "$T/gw.out")
METRICS=$(sed -n 's/.*metrics=\([^ ]*\).*/\1/p' "$T/gw.out")
[ -n "$NFS" ] && [ -n "$METRICS" ] || fail "no ready line"
URL="nfs://127.0.0.1/mapfs?nfsport=$NFS&mountport=$MNT&version=3"

gauge() {
	curl -sf "http://$METRICS/metrics" | awk -v n="$1" '$1 == n { print int($2) }'
}

THREADS=10 PER=1050
total=0
for round in 1 2; do
	step "round $round: $((THREADS * PER)) files of 1 KiB"
	"$BENCH" -p "$THREADS" -q 8 --items write-small \
		--small-file-count "$PER" --small-file-size 1K \
		--dir "r$round" --keep --no-verify "$URL" >"$T/bench$round" 2>&1 ||
		{ cat "$T/bench$round" >&2; fail "round $round: mapfs-bench"; }
	total=$((total + THREADS * PER))
	if [ "$round" = 1 ]; then
		# The level: the gateway as a round of work left it.
		sleep 1
		readers0=$(gauge mapfs_db_readers)
		threads0=$(gauge mapfs_threads)
		fds0=$(gauge mapfs_open_fds)
	fi
	step "round $round: flush"
	"$GW" flush --state "$T/state" >"$T/flush$round" 2>&1 ||
		{ cat "$T/flush$round" >&2; fail "round $round: flush ($total files written)"; }
done

step "the bucket holds every file"
n=$(python3 - "$MAPFS_S3_ENDPOINT" "$MAPFS_S3_BUCKET" "$PREFIX/" <<'PY'
import sys, boto3
from botocore.config import Config
ep, bucket, prefix = sys.argv[1:4]
s3 = boto3.client("s3", endpoint_url=ep, region_name="us-east-1",
                  config=Config(s3={"addressing_style": "path"}))
n = 0
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
    n += sum(1 for o in page.get("Contents", []) if not o["Key"].endswith("/"))
print(n)
PY
)
[ "$n" -ge "$total" ] || fail "the bucket holds $n files of $total written"
echo "$n objects for $total files written"

step "resources back at their level"
sleep 1
readers=$(gauge mapfs_db_readers)
threads=$(gauge mapfs_threads)
fds=$(gauge mapfs_open_fds)
echo "reader slots $readers0 -> $readers, threads $threads0 -> $threads, descriptors $fds0 -> $fds"
[ "$readers" -le $((readers0 + 4)) ] || fail "reader slots grew: $readers0 -> $readers"
[ "$threads" -le $((threads0 + 4)) ] || fail "threads grew: $threads0 -> $threads"
# Cache files stay open up to the fd table's 4,096.
[ "$fds" -le $((fds0 + 4096)) ] || fail "descriptors grew: $fds0 -> $fds"
[ "$(gauge mapfs_db_log_on)" = 1 ] || fail "the database's log was given up"
grep -q "checkpoint failed" "$T/gw.err" && fail "a checkpoint failed"
"$GW" ctl --state "$T/state" status >"$T/status" || fail "ctl status"
grep -q "^db_readers: " "$T/status" || fail "ctl status: no db_readers line"
grep -q "^dirty_files: 0$" "$T/status" || { cat "$T/status" >&2; fail "ctl status: changes left"; }
echo "PASS: $total files through one gateway, all in the bucket"
