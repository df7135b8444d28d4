#!/usr/bin/env bash
# bench/uploads.sh - the write-back of many small files to radosgw: the
# same workload through two gateway binaries and as raw PUTs, on one
# radosgw, interleaved round by round, medians printed:
#   before  GW_BEFORE (an older build, e.g. one uploading one at a time)
#   after   GW (this tree's build)
#   raw     boto3 PUTs of as many objects of the size, 16 in flight
#           (the store's own speed for this workload; issue 18)
# Issue 21 used it to price conditional uploads (GW_BEFORE without them).
#
#   GW_BEFORE=/path/to/old/mapfs-gw bench/uploads.sh [--rounds N]
#       [--files N] [--size SIZE]
#
# Each gateway run: a fresh gateway (uploads held back: --upload-delay
# 3600), mapfs-bench write-small makes 2 x --files files of --size, then
# `mapfs-gw flush` uploads them all; the figure is the flush's objects
# per second and the gateway's CPU seconds.  Makes no assertions.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
GW=${GW:-$ROOT/build/mapfs-gw}
BENCH=${BENCH:-$ROOT/build/bench/mapfs-bench}
GW_BEFORE=${GW_BEFORE:-}
ROUNDS=3 FILES=500 SIZE=4K
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$2; shift ;;
	--files) FILES=$2; shift ;;
	--size) SIZE=$2; shift ;;
	-h|--help) sed -n '2,18p' "$0"; exit 0 ;;
	*) echo "uploads.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[ -x "$GW" ] && [ -x "$BENCH" ] || { echo "uploads.sh: build first" >&2; exit 1; }
[ -x "$GW_BEFORE" ] || { echo "uploads.sh: set GW_BEFORE to another gateway build" >&2; exit 1; }

. "$HERE/rgw_lib.sh"
rgw_setup uploads

# run WHICH ROUND: a fresh gateway, the files, a timed flush.
run() {
	local which=$1 round=$2 d=$WORK/$1-$2 gw=$GW pid t0 t1 c0 c1
	[ "$which" = before ] && gw=$GW_BEFORE
	gw_start "$gw" "$d" "$which-$round" --upload-delay 3600
	pid=$GW_PID
	"$BENCH" -p 2 -q 4 --items write-small --small-file-count "$FILES" \
		--small-file-size "$SIZE" --keep --json \
		"$NFS_URL" >/dev/null
	c0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	t0=$(date +%s.%N)
	"$GW" flush --state "$d/state" >/dev/null
	t1=$(date +%s.%N)
	c1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	printf '%s\t%s\t%s\t%s\n' "$which" "$round" "$(echo "$t1 - $t0" | bc)" \
		"$(echo "($c1 - $c0) / $(getconf CLK_TCK)" | bc -l)" >>"$WORK/res.tsv"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
}

# raw ROUND: as many PUTs of SIZE as the gateway makes, 16 in flight.
raw() {
	python3 - "$1" "$((2 * FILES))" "$SIZE" >>"$WORK/res.tsv" <<'PY'
import os, sys, time, boto3, botocore.config
from concurrent.futures import ThreadPoolExecutor
rnd, n, size = sys.argv[1], int(sys.argv[2]), sys.argv[3]
mult = {"K": 1024, "M": 1 << 20}.get(size[-1], 1)
body = os.urandom(int(size.rstrip("KM")) * mult)
s3 = boto3.client("s3", endpoint_url=os.environ["MAPFS_S3_ENDPOINT"],
                  region_name="us-east-1",
                  config=botocore.config.Config(max_pool_connections=16))
bucket = os.environ["MAPFS_S3_BUCKET"]
t0, c0 = time.time(), time.process_time()
with ThreadPoolExecutor(16) as ex:
    list(ex.map(lambda i: s3.put_object(Bucket=bucket, Key=f"raw-{rnd}/f{i}",
                                        Body=body), range(n)))
print(f"raw\t{rnd}\t{time.time() - t0}\t{time.process_time() - c0}")
PY
}

for round in $(seq "$ROUNDS"); do
	run before "$round"
	run after "$round"
	raw "$round"
	echo "uploads.sh: round $round done" >&2
done
python3 - "$WORK/res.tsv" "$FILES" "$SIZE" <<'PY'
import sys, statistics, collections
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    which, rnd, secs, cpu = line.split("\t")
    v[which].append((float(secs), float(cpu)))
n = 2 * int(sys.argv[2])
print(f"flush of {n} files of {sys.argv[3]} to radosgw; medians of {len(v['after'])} rounds")
print("| run | seconds | objects/s | CPU s (gateway; raw: the client) | vs before | vs raw |")
print("|---|---|---|---|---|---|")
rate = {w: n / statistics.median(x[0] for x in v[w]) for w in v}
for which in ("before", "after", "raw"):
    secs = statistics.median(x[0] for x in v[which])
    cpu = statistics.median(x[1] for x in v[which])
    print(f"| {which} | {secs:.2f} | {rate[which]:,.0f} | {cpu:.2f} | "
          f"{rate[which] / rate['before']:.2f} | {rate[which] / rate['raw']:.2f} |")
PY
