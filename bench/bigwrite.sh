#!/usr/bin/env bash
# bench/bigwrite.sh - a big file written through NFS until its object is in
# the bucket, on one radosgw, against the store's own speed (issue 18,
# "write 256 MiB + flush until in the bucket: >= 0.8 of one raw
# single-stream PUT").  Interleaved round by round, medians printed:
#   before  GW_BEFORE (an older build, e.g. one that uploads only once the
#           file is due)
#   after   GW (this tree's build)
#   raw     one PUT of the same file with curl --aws-sigv4 (one stream,
#           UNSIGNED-PAYLOAD: the client spends nothing but the send)
#   s3fs    where s3fs is installed: cp of the file into an s3fs-fuse
#           mount of the same bucket (its defaults; cp returns once s3fs
#           has sent the object, at close), a fresh mount each round
#
#   GW_BEFORE=/path/to/old/mapfs-gw bench/bigwrite.sh [--rounds N]
#       [--size MIB]
#
# GW_ARGS adds options to both gateways (e.g. --multipart-threshold 64M:
# parts as on a remote S3, where one PUT ends at 64 MiB; on loopback it
# ends at 1 GiB), AFTER_ARGS to this build's alone (--early-upload).
# LOGLEVEL=debug prints each upload's stage timings.
#
# Each gateway run: a fresh gateway (upload delay 5 s, the default), then
# timed together: nfs-cp of the file (libnfs, one stream) and
# `mapfs-gw flush`, which returns once the object is in the bucket.  The
# gateway's CPU seconds over the same span, and its peak resident memory
# (VmHWM) over its life, are printed beside it.  READBACK=1 adds, after
# each "after" run, a cold read of that object by a fresh gateway (empty
# state) on the same prefix (nfs-cat to /dev/null), beside one raw GET.
# Makes no assertions.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
GW=${GW:-$ROOT/build/mapfs-gw}
GW_BEFORE=${GW_BEFORE:-}
ROUNDS=3 MIB=256
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$2; shift ;;
	--size) MIB=$2; shift ;;
	-h|--help) sed -n '2,31p' "$0"; exit 0 ;;
	*) echo "bigwrite.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[ -x "$GW" ] || { echo "bigwrite.sh: build first" >&2; exit 1; }
[ -x "$GW_BEFORE" ] || { echo "bigwrite.sh: set GW_BEFORE to another gateway build" >&2; exit 1; }
command -v nfs-cp >/dev/null || { echo "bigwrite.sh: needs nfs-cp (libnfs-utils)" >&2; exit 1; }

. "$HERE/rgw_lib.sh"
. "$HERE/s3fs_lib.sh"
export MAPFS_RGW_STORE_GB=${MAPFS_RGW_STORE_GB:-8} # the rounds' objects
rgw_setup bigwrite
head -c "$((MIB << 20))" /dev/urandom >"$WORK/file"
cat "$WORK/file" >/dev/null # in the page cache for every run alike

# run WHICH ROUND: a fresh gateway, the copy and the flush, timed.
run() {
	local which=$1 round=$2 d=$WORK/$1-$2 gw=$GW pid t0 t1 t2 c0 c1
	[ "$which" = before ] && gw=$GW_BEFORE
	local args=${GW_ARGS:-}
	[ "$which" = after ] && args="$args ${AFTER_ARGS:-}"
	# shellcheck disable=SC2086 # words
	gw_start "$gw" "$d" "$which-$round" $args
	pid=$GW_PID
	# The run before left 256 MiB of dirty cache file: written back now,
	# not during this run (the second gateway of a round paid it: nfs-cp
	# 0.9 s against 0.5, the same binary in both places).
	sync
	c0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	t0=$(date +%s.%N)
	nfs-cp "$WORK/file" \
		"nfs://127.0.0.1/mapfs/big?nfsport=$NFS_PORT&mountport=$MOUNT_PORT&version=3" >/dev/null
	t1=$(date +%s.%N)
	"$GW" flush --state "$d/state" >/dev/null
	t2=$(date +%s.%N)
	c1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$which" "$round" \
		"$(echo "$t2 - $t0" | bc)" "$(echo "$t1 - $t0" | bc)" \
		"$(echo "($c1 - $c0) / $(getconf CLK_TCK)" | bc -l)" "$(hwm "$pid")" >>"$WORK/res.tsv"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	[ -z "${LOGLEVEL:-}" ] || grep -E "parts were|uploaded big|written again|early|goes up" "$d/err" >&2 || true
	# Its 256 MiB cache file goes, as s3fs's temporary file does: on this
	# VM memory freed a moment ago is cheap to fill again, memory handed
	# back to the host is not, and the second gateway of a round ran at
	# twice the CPU of the first (same binary) while the first one's
	# cache file stayed.
	rm -rf "$d"
}

# The peak resident memory of process PID so far, in MiB.
hwm() {
	awk '/^VmHWM:/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status"
}

# s3fs ROUND: cp of the file into a fresh s3fs mount; its CPU seconds
# (the s3fs process) beside.
s3fs_run() {
	local t0 t1 c0 c1
	s3fs_mount || { echo "bigwrite.sh: s3fs did not mount" >&2; cat "$WORK/s3fs.log" >&2; exit 1; }
	PIDS+=($S3FS_PID)
	sync
	c0=$(awk '{print $14 + $15}' "/proc/$S3FS_PID/stat")
	t0=$(date +%s.%N)
	cp "$WORK/file" "$S3FS_MNT/s3fs-$1"
	t1=$(date +%s.%N)
	c1=$(awk '{print $14 + $15}' "/proc/$S3FS_PID/stat")
	printf 's3fs\t%s\t%s\t0\t%s\t%s\n' "$1" "$(echo "$t1 - $t0" | bc)" \
		"$(echo "($c1 - $c0) / $(getconf CLK_TCK)" | bc -l)" "$(hwm "$S3FS_PID")" >>"$WORK/res.tsv"
	s3fs_umount
}

# coldread ROUND: a fresh gateway, empty state, reads after-ROUND's object.
coldread() {
	local d=$WORK/read-$1 pid t0 t1 c0 c1
	gw_start "$GW" "$d" "after-$1"
	pid=$GW_PID
	c0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	t0=$(date +%s.%N)
	nfs-cat "nfs://127.0.0.1/mapfs/big?nfsport=$NFS_PORT&mountport=$MOUNT_PORT&version=3" >/dev/null
	t1=$(date +%s.%N)
	c1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	printf 'cold read\t%s\t%s\t0\t%s\t%s\n' "$1" "$(echo "$t1 - $t0" | bc)" \
		"$(echo "($c1 - $c0) / $(getconf CLK_TCK)" | bc -l)" "$(hwm "$pid")" >>"$WORK/res.tsv"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	rm -rf "$d"
}

# raw ROUND: one PUT of the file, one stream.
raw() {
	local t0 t1 code
	t0=$(date +%s.%N)
	code=$(curl -s --noproxy '*' -o /dev/null -w '%{http_code}' \
		--aws-sigv4 "aws:amz:us-east-1:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
		-T "$WORK/file" "$MAPFS_S3_ENDPOINT/$MAPFS_S3_BUCKET/raw-$1")
	t1=$(date +%s.%N)
	[ "$code" = 200 ] || { echo "bigwrite.sh: raw PUT: HTTP $code" >&2; exit 1; }
	printf 'raw\t%s\t%s\t0\t0\t0\n' "$1" "$(echo "$t1 - $t0" | bc)" >>"$WORK/res.tsv"
	[ -z "${READBACK:-}" ] && return
	t0=$(date +%s.%N)
	code=$(curl -s --noproxy '*' -o /dev/null -w '%{http_code}' \
		--aws-sigv4 "aws:amz:us-east-1:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
		"$MAPFS_S3_ENDPOINT/$MAPFS_S3_BUCKET/raw-$1")
	t1=$(date +%s.%N)
	[ "$code" = 200 ] || { echo "bigwrite.sh: raw GET: HTTP $code" >&2; exit 1; }
	printf 'raw GET\t%s\t%s\t0\t0\t0\n' "$1" "$(echo "$t1 - $t0" | bc)" >>"$WORK/res.tsv"
}

for round in $(seq "$ROUNDS"); do
	run before "$round"
	run after "$round"
	raw "$round"
	! command -v s3fs >/dev/null || s3fs_run "$round"
	[ -z "${READBACK:-}" ] || coldread "$round"
	echo "bigwrite.sh: round $round done" >&2
done
python3 - "$WORK/res.tsv" "$MIB" <<'PY'
import sys, statistics, collections
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    which, rnd, secs, copy, cpu, rss = line.split("\t")
    v[which].append((float(secs), float(copy), float(cpu), float(rss)))
mib = int(sys.argv[2])
print(f"{mib} MiB written through NFS until in the bucket (radosgw); "
      f"medians of {len(v['after'])} rounds")
print("| run | seconds | MiB/s | of it nfs-cp | gateway CPU s | CPU s per GiB | peak RSS MiB | vs raw | rounds vs raw |")
print("|---|---|---|---|---|---|---|---|---|")
for which in ("before", "after", "raw", "s3fs", "cold read", "raw GET"):
    if not v[which]:
        continue
    base = "raw GET" if which in ("cold read", "raw GET") else "raw"
    raw = statistics.median(x[0] for x in v[base])
    secs = statistics.median(x[0] for x in v[which])
    copy = statistics.median(x[1] for x in v[which])
    cpu = statistics.median(x[2] for x in v[which])
    rss = statistics.median(x[3] for x in v[which])
    rounds = " ".join(f"{r / x[0]:.2f}" for r, x in
                      zip((y[0] for y in v[base]), v[which]))
    print(f"| {which} | {secs:.2f} | {mib / secs:.0f} | {copy:.2f} | "
          f"{cpu:.2f} | {cpu * 1024 / mib:.2f} | {rss:.0f} | {raw / secs:.2f} | {rounds} |")
if v["s3fs"]:
    s3fs = statistics.median(x[0] for x in v["s3fs"])
    for which in ("before", "after"):
        if v[which]:
            secs = statistics.median(x[0] for x in v[which])
            rounds = " ".join(f"{s[0] / x[0]:.2f}" for s, x in zip(v["s3fs"], v[which]))
            print(f"{which} vs s3fs: {s3fs / secs:.2f}x (rounds {rounds}); "
                  "CPU s per GiB in the table is s3fs's own process for its row")
PY
