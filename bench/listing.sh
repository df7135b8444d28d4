#!/usr/bin/env bash
# bench/listing.sh - a cold READDIRPLUS walk of a directory of objects no
# gateway has seen, beside the store's own listing, on one radosgw (issue
# 18: "a cold READDIRPLUS walk of a 100,000-object prefix: at least 0.8 of
# raw ListObjectsV2 pages").  Interleaved round by round, medians printed:
#   raw     ListObjectsV2 of the prefix, page after page (1000 keys each,
#           delimiter '/'), one curl --aws-sigv4 per page
#   before  GW_BEFORE (another build), if set
#   after   GW (this tree's build)
#   listing GW with --listing-attrs (new objects take the listing's
#           attributes, no HEAD each)
#   before-listing  GW_BEFORE with --listing-attrs, if set (and
#           --no-heads: only the two --listing-attrs runs, for builds
#           that differ in the listing itself, not the HEADs)
#   open, before-open (--open, instead of the walks): a fresh gateway,
#           then nfs-cat of the directory's first object (LOOKUPs of d
#           and of it, then its READ): how long a client that knows a
#           name waits for a directory no gateway has listed
# Each gateway run: a fresh gateway (empty state) on the bucket, then
# nfs-ls of the directory (libnfs: READDIRPLUS pages), every name counted.
#
#   [GW_BEFORE=/path/to/old/mapfs-gw] bench/listing.sh [--rounds N]
#       [--objects N] [--no-heads | --open]
#
# The objects (1 KiB each, OBJECTS of them under list/d/) are put once by
# boto3, 16 in flight, as another S3 writer would: a gateway knows
# nothing of them, so each is one HEAD (owner, mode, mtime, symlink)
# besides its share of the listing.  LOGLEVEL=debug prints where each
# listing's time went (pages, HEADs, merge).  Makes no assertions.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
GW=${GW:-$ROOT/build/mapfs-gw}
GW_BEFORE=${GW_BEFORE:-}
ROUNDS=3 OBJECTS=10000 NO_HEADS= OPEN=
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$2; shift ;;
	--objects) OBJECTS=$2; shift ;;
	--no-heads) NO_HEADS=1 ;;
	--open) OPEN=1 ;;
	-h|--help) sed -n '2,26p' "$0"; exit 0 ;;
	*) echo "listing.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[ -x "$GW" ] || { echo "listing.sh: build first" >&2; exit 1; }
[ -z "$GW_BEFORE" ] || [ -x "$GW_BEFORE" ] || { echo "listing.sh: GW_BEFORE is not a program" >&2; exit 1; }
command -v nfs-ls >/dev/null || { echo "listing.sh: needs nfs-ls (libnfs-utils)" >&2; exit 1; }

. "$HERE/rgw_lib.sh"
rgw_setup listing

python3 - "$OBJECTS" <<'PY'
import os, sys, boto3, concurrent.futures as cf
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=os.environ["MAPFS_S3_ENDPOINT"],
                  region_name="us-east-1",
                  config=Config(max_pool_connections=16,
                                s3={"addressing_style": "path"}))
b, body = os.environ["MAPFS_S3_BUCKET"], b"x" * 1024
with cf.ThreadPoolExecutor(16) as ex:
    list(ex.map(lambda i: s3.put_object(Bucket=b, Key=f"list/d/f{i:07d}",
                                        Body=body), range(int(sys.argv[1]))))
PY
echo "listing.sh: $OBJECTS objects put" >&2

now() { date +%s.%N; }

# raw ROUND: every page of list/d/, one after the other (SigV4 by
# botocore, the pages read with a regular expression: the client's own
# cost stays small beside the store's).
raw() {
	python3 - "$1" "$OBJECTS" >>"$WORK/res.tsv" <<'PY'
import os, re, sys, time, urllib.parse, urllib.request
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
creds = Credentials(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
base = f'{os.environ["MAPFS_S3_ENDPOINT"]}/{os.environ["MAPFS_S3_BUCKET"]}'
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
t0, n, tok = time.time(), 0, None
while True:
    q = {"list-type": "2", "prefix": "list/d/", "delimiter": "/"}
    if tok:
        q["continuation-token"] = tok
    req = AWSRequest("GET", base + "?" + urllib.parse.urlencode(q, safe="~", quote_via=urllib.parse.quote))
    S3SigV4Auth(creds, "s3", "us-east-1").add_auth(req)
    body = opener.open(urllib.request.Request(req.url, headers=dict(req.headers))).read()
    n += body.count(b"<Key>")
    m = re.search(rb"<NextContinuationToken>([^<]*)</NextContinuationToken>", body)
    if not m:
        break
    tok = m.group(1).decode()
if n != int(sys.argv[2]):
    sys.exit(f"listing.sh: raw listing saw {n} keys")
print(f"raw\t{sys.argv[1]}\t{time.time() - t0:.3f}\t0")
PY
}

# gw WHICH ROUND: a fresh gateway, nfs-ls of d (*open: nfs-cat of d's
# first object).
gw() {
	local which=$1 d=$WORK/gw-$1-$2 bin=$GW t0 t1 c0 c1 n pid args=() path=d
	case $which in before*) bin=$GW_BEFORE ;; esac
	case $which in *listing) args=(--listing-attrs) ;; esac
	case $which in *open) path=d/f0000000 ;; esac
	gw_start "$bin" "$d" list "${args[@]}"
	pid=$GW_PID
	local url="nfs://127.0.0.1/mapfs/$path?nfsport=$NFS_PORT&mountport=$MOUNT_PORT&version=3"
	c0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	t0=$(now)
	case $which in
	*open) n=$(nfs-cat "$url" | wc -c) ;;
	*) n=$(nfs-ls "$url" | wc -l) ;; # . and .. too
	esac
	t1=$(now)
	c1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	case $which in
	*open) [ "$n" = 1024 ] || { echo "listing.sh: $which read $n bytes" >&2; exit 1; } ;;
	*) [ "$n" -ge "$OBJECTS" ] || { echo "listing.sh: $which listed $n names" >&2; exit 1; } ;;
	esac
	printf '%s\t%s\t%s\t%s\n' "$which" "$2" "$(echo "$t1 - $t0" | bc)" \
		"$(echo "($c1 - $c0) / $(getconf CLK_TCK)" | bc -l)" >>"$WORK/res.tsv"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	[ -z "${LOGLEVEL:-}" ] || grep "fs: listed" "$d/err" >&2 || true
	rm -rf "$d"
}

BUILDS=(after listing)
[ -z "$GW_BEFORE" ] || BUILDS=(before after before-listing listing)
[ -z "${NO_HEADS:-}" ] || BUILDS=(listing)
[ -z "${NO_HEADS:-}" ] || [ -z "$GW_BEFORE" ] || BUILDS=(before-listing listing)
[ -z "$OPEN" ] || BUILDS=(open)
[ -z "$OPEN" ] || [ -z "$GW_BEFORE" ] || BUILDS=(before-open open)
for round in $(seq "$ROUNDS"); do
	raw "$round"
	for b in "${BUILDS[@]}"; do gw "$b" "$round"; done
	echo "listing.sh: round $round done" >&2
done
python3 - "$WORK/res.tsv" "$OBJECTS" <<'PY'
import sys, statistics, collections
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    which, rnd, secs, cpu = line.rstrip("\n").split("\t")
    v[which].append((float(secs), float(cpu)))
n = int(sys.argv[2])
what = "open" in v and "Opening the first" or "Cold walk"
print(f"{what} of {n} objects under one prefix (radosgw), medians of "
      f"{len(v['raw'])} rounds")
print("| run | seconds | names/s | vs raw (median) | rounds vs raw | gateway CPU s |")
print("|---|---|---|---|---|---|")
for which in ("raw", "before", "after", "before-listing", "listing",
              "before-open", "open"):
    if not v[which]:
        continue
    secs = statistics.median(x[0] for x in v[which])
    ratios = [r[0] / x[0] for r, x in zip(v["raw"], v[which])]
    rate = "-" if "open" in which else f"{n / secs:.0f}"
    print(f"| {which} | {secs:.2f} | {rate} | {statistics.median(ratios):.2f} | "
          f"{' '.join(f'{x:.2f}' for x in ratios)} | "
          f"{statistics.median(x[1] for x in v[which]):.2f} |")
PY
