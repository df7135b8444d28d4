#!/usr/bin/env bash
# bench/visibility.sh - how soon another S3 client's PUT shows through NFS
# (issue 21): one radosgw, one gateway with the listing TTLs at their
# defaults (--dir-ttl 5) and the event receiver on (--events, radosgw
# pushing its bucket notifications to it), then the same without events.
# For each of --puts objects: PUT by boto3, then `nfs-ls` of the export
# root every few ms until the name is there; the time from the PUT's
# answer to the first listing that has it.  Medians and p99 printed.
#
#   bench/visibility.sh [--puts N] [--persistent]
#
# --persistent: the topic queues and retries (radosgw's persistent=true)
# instead of pushing before the PUT answers.  Makes no assertions.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
GW=${GW:-$ROOT/build/mapfs-gw}
PUTS=30 PERSIST=
while [ $# -gt 0 ]; do
	case $1 in
	--puts) PUTS=$2; shift ;;
	--persistent) PERSIST=--persistent ;;
	-h|--help) sed -n '2,15p' "$0"; exit 0 ;;
	*) echo "visibility.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[ -x "$GW" ] || { echo "visibility.sh: build first" >&2; exit 1; }
. "$HERE/rgw_lib.sh"
rgw_setup vis
SECRET=bench-secret-0123456789

# run NAME EVENTS(0/1): a gateway on prefix NAME/, PUTS objects timed.
run() {
	local name=$1 ev=$2 d=$WORK/$1 port args=()
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	[ "$ev" = 1 ] && args=(--events "127.0.0.1:$port" --events-secret "$SECRET")
	gw_start "$GW" "$d" "$name" "${args[@]}"
	[ "$ev" = 1 ] && python3 "$ROOT/tests/s3/notify.py" "$MAPFS_S3_ENDPOINT" \
		"$MAPFS_S3_BUCKET" "$name/" "http://127.0.0.1:$port/$SECRET" $PERSIST >/dev/null
	python3 - "$name" "$NFS_URL" \
		"$PUTS" >>"$WORK/res.tsv" <<'PY'
import os, subprocess, sys, time
import boto3
from botocore.config import Config
name, url, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
s3 = boto3.client("s3", endpoint_url=os.environ["MAPFS_S3_ENDPOINT"],
                  region_name="us-east-1",
                  config=Config(s3={"addressing_style": "path"}))
ls = lambda: subprocess.run(["nfs-ls", url], capture_output=True, text=True).stdout
ls()  # listed once: later names must come from the store
for i in range(n):
    key = f"o{i:04d}"
    s3.put_object(Bucket=os.environ["MAPFS_S3_BUCKET"], Key=f"{name}/{key}", Body=b"x")
    t0 = time.monotonic()
    while key not in ls():
        if time.monotonic() - t0 > 30:
            break
        time.sleep(0.002)
    print(f"{name}\t{(time.monotonic() - t0) * 1000:.1f}")
PY
}

run events 1
run ttl-only 0
python3 - "$WORK/res.tsv" <<'PY'
import sys, statistics, collections
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    k, ms = line.split("\t")
    v[k].append(float(ms))
print("| gateway | PUTs | median ms | p99 ms | max ms |")
print("|---|---|---|---|---|")
for k in ("events", "ttl-only"):
    x = sorted(v[k])
    p99 = x[min(len(x) - 1, int(round(0.99 * (len(x) - 1))))]
    print(f"| {k} | {len(x)} | {statistics.median(x):.0f} | {p99:.0f} | {x[-1]:.0f} |")
PY
