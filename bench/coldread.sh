#!/usr/bin/env bash
# bench/coldread.sh - cold reads through a fresh gateway beside the store's
# own speed, on one radosgw (issue 18: "cold read 256 MiB: >= 0.9 of a raw
# 8-way ranged GET at the median, no round below 0.7"; "4 cold readers of
# 4 files: aggregate >= 0.9 of the raw aggregate").  Interleaved round by
# round, medians printed:
#   raw-8    one object read as 8 ranged GETs at once (curl --aws-sigv4)
#   raw-4    READERS objects at once, 8 ranged GETs in all (as many as
#            the gateway's fetch workers)
#   one      a fresh gateway (empty state) started, then nfs-cat of one
#            object to /dev/null (the first read after start)
#   many     a fresh gateway, READERS nfs-cats of READERS objects at once
# for GW (this tree's build) and, if set, GW_BEFORE (another build).
#
#   [GW_BEFORE=/path/to/old/mapfs-gw] bench/coldread.sh [--rounds N]
#       [--size MIB] [--readers N]
#
# The objects are put into the bucket once, by curl, under the gateways'
# prefix (as another S3 writer would).  Each gateway runs with
# --log-level debug, and its "cache: fetched" lines are summed into where
# the time of its GETs went: queued for a fetch worker, waiting for the
# first byte, streaming, landing in the cache file (per GET, summed over
# GETs in flight at once, so the stages add up to more than the wall
# time).  The gateway's CPU seconds per GiB and peak RSS are printed too.
# Makes no assertions.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
GW=${GW:-$ROOT/build/mapfs-gw}
GW_BEFORE=${GW_BEFORE:-}
ROUNDS=3 MIB=256 READERS=4
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$2; shift ;;
	--size) MIB=$2; shift ;;
	--readers) READERS=$2; shift ;;
	-h|--help) sed -n '2,24p' "$0"; exit 0 ;;
	*) echo "coldread.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[ -x "$GW" ] || { echo "coldread.sh: build first" >&2; exit 1; }
[ -z "$GW_BEFORE" ] || [ -x "$GW_BEFORE" ] || { echo "coldread.sh: GW_BEFORE is not a program" >&2; exit 1; }
command -v nfs-cat >/dev/null || { echo "coldread.sh: needs nfs-cat (libnfs-utils)" >&2; exit 1; }

. "$HERE/rgw_lib.sh"
export MAPFS_RGW_STORE_GB=${MAPFS_RGW_STORE_GB:-$(((READERS + 1) * MIB / 1024 + 4))}
rgw_setup coldread
SIZE=$((MIB << 20))
LOGLEVEL=debug

s3curl() {
	curl -s --noproxy '*' --aws-sigv4 "aws:amz:us-east-1:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@"
}

# The objects: data/f0 .. data/f(READERS-1), SIZE bytes each.
head -c "$SIZE" /dev/urandom >"$WORK/file"
for i in $(seq 0 $((READERS - 1))); do
	code=$(s3curl -o /dev/null -w '%{http_code}' -T "$WORK/file" \
		"$MAPFS_S3_ENDPOINT/$MAPFS_S3_BUCKET/data/f$i")
	[ "$code" = 200 ] || { echo "coldread.sh: PUT data/f$i: HTTP $code" >&2; exit 1; }
done
rm -f "$WORK/file"

now() { date +%s.%N; }
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hwm() { awk '/^VmHWM:/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }

# rec WHICH ROUND SECONDS BYTES [CPU RSS STAGES]
rec() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:-0}" \
		"${6:-0}" "${7:-0 0 0 0 0 0}" >>"$WORK/res.tsv"
}

# raw8 ROUND: data/f0 as 8 ranged GETs at once.
raw8() {
	local part=$((SIZE / 8)) t0 t1 pids=() i
	t0=$(now)
	for i in 0 1 2 3 4 5 6 7; do
		s3curl -o /dev/null -w '%{http_code} %{size_download}\n' \
			-r "$((i * part))-$(((i + 1) * part - 1))" \
			"$MAPFS_S3_ENDPOINT/$MAPFS_S3_BUCKET/data/f0" >"$WORK/r8-$i" &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i"; done
	t1=$(now)
	! grep -qvx "206 $part" "$WORK"/r8-* || { echo "coldread.sh: a raw ranged GET failed" >&2; exit 1; }
	rec raw-8 "$1" "$(echo "$t1 - $t0" | bc)" "$SIZE"
}

# rawn ROUND: every object at once, as 8 ranged GETs in all (the
# gateway's 8 fetch workers), or one GET each past 8 objects.
rawn() {
	local t0 t1 pids=() i j k=$((8 / READERS)) part
	[ "$k" -ge 1 ] || k=1
	part=$((SIZE / k))
	rm -f "$WORK"/rn-*
	t0=$(now)
	for i in $(seq 0 $((READERS - 1))); do
		for j in $(seq 0 $((k - 1))); do
			s3curl -o /dev/null -w '%{http_code} %{size_download}\n' \
				-r "$((j * part))-$(((j + 1) * part - 1))" \
				"$MAPFS_S3_ENDPOINT/$MAPFS_S3_BUCKET/data/f$i" >"$WORK/rn-$i-$j" &
			pids+=($!)
		done
	done
	for i in "${pids[@]}"; do wait "$i"; done
	t1=$(now)
	! grep -qvx "20[06] $part" "$WORK"/rn-* || { echo "coldread.sh: a raw GET failed" >&2; exit 1; }
	rec raw-$READERS "$1" "$(echo "$t1 - $t0" | bc)" $((SIZE * READERS))
}

# stages LOG: the summed stage times of its GETs, in seconds, and the
# first GET's time to first byte: "queue wait stream land first gets".
stages() {
	awk '/cache: fetched/ {
		for (i = 1; i <= NF; i++) {
			if ($i == "queued") q += $(i + 1)
			if ($i == "byte") { w += $(i + 1); if (!n) f = $(i + 1) }
			if ($i == "stream") s += $(i + 1)
			if ($i == "land") l += $(i + 1)
		}
		n++
	} END { printf "%.3f %.3f %.3f %.3f %.3f %d", q / 1e3, w / 1e3, s / 1e3, l / 1e3, f / 1e3, n }' "$1"
}

# gw WHICH ROUND N: a fresh gateway, then N nfs-cats at once of f0..fN-1.
gw() {
	local which=$1 round=$2 n=$3 d=$WORK/gw-$1-$2-$3 bin=$GW t0 t1 c0 c1 pids=() i pid
	[ "${which%%-*}" = before ] && bin=$GW_BEFORE
	gw_start "$bin" "$d" data
	pid=$GW_PID
	c0=$(cpu_of "$pid")
	t0=$(now)
	for i in $(seq 0 $((n - 1))); do
		nfs-cat "nfs://127.0.0.1/mapfs/f$i?nfsport=$NFS_PORT&mountport=$MOUNT_PORT&version=3" |
			wc -c >"$d/got-$i" &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i"; done
	t1=$(now)
	c1=$(cpu_of "$pid")
	for i in $(seq 0 $((n - 1))); do
		[ "$(cat "$d/got-$i")" = "$SIZE" ] || { echo "coldread.sh: $which: f$i: $(cat "$d/got-$i") bytes" >&2; exit 1; }
	done
	rec "$which" "$round" "$(echo "$t1 - $t0" | bc)" $((SIZE * n)) \
		"$(echo "($c1 - $c0) / $(getconf CLK_TCK)" | bc -l)" "$(hwm "$pid")" \
		"$(stages "$d/err")"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	rm -rf "$d"
}

BUILDS=(after)
[ -z "$GW_BEFORE" ] || BUILDS=(before after)
for round in $(seq "$ROUNDS"); do
	raw8 "$round"
	for b in "${BUILDS[@]}"; do gw "$b-one" "$round" 1; done
	rawn "$round"
	for b in "${BUILDS[@]}"; do gw "$b-many" "$round" "$READERS"; done
	echo "coldread.sh: round $round done" >&2
done
python3 - "$WORK/res.tsv" "$MIB" "$READERS" <<'PY'
import sys, statistics, collections
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    which, rnd, secs, nbytes, cpu, rss, st = line.rstrip("\n").split("\t")
    v[which].append((float(secs), int(nbytes), float(cpu), float(rss),
                     [float(x) for x in st.split()]))
mib, readers = int(sys.argv[2]), int(sys.argv[3])
med = statistics.median
print(f"Cold reads of {mib} MiB objects (radosgw), medians of "
      f"{len(v['raw-8'])} rounds; stages: seconds summed over the GETs")
print("| run | seconds | MiB/s | vs raw (median) | rounds vs raw | gateway CPU s per GiB | peak RSS MiB | GETs | queued | first byte | stream | land | first GET's first byte |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for which in ["raw-8"] + [w for w in v if w.endswith("-one")] + \
        [f"raw-{readers}"] + [w for w in v if w.endswith("-many")]:
    rows = v[which]
    base = v["raw-8" if which.endswith("-one") else f"raw-{readers}"]
    secs = med(r[0] for r in rows)
    rate = med(r[1] / r[0] / 2**20 for r in rows)
    if which.startswith("raw"):
        print(f"| {which} | {secs:.2f} | {rate:.0f} | 1.00 | | | | | | | | | |")
        continue
    ratios = [(b[0]) / r[0] for b, r in zip(base, rows)]
    st = [med(r[4][k] for r in rows) for k in range(6)]
    cpu = med(r[2] / (r[1] / 2**30) for r in rows)
    print(f"| {which} | {secs:.2f} | {rate:.0f} | {med(ratios):.2f} | "
          f"{' '.join(f'{x:.2f}' for x in ratios)} | {cpu:.2f} | "
          f"{med(r[3] for r in rows):.0f} | {st[5]:.0f} | {st[0]:.2f} | "
          f"{st[1]:.2f} | {st[2]:.2f} | {st[3]:.2f} | {st[4]*1000:.0f} ms |")
print()
print("Per round (seconds; stages summed over the round's GETs):")
print("| run | round | seconds | vs raw | queued | first byte | stream | land |")
print("|---|---|---|---|---|---|---|---|")
for which in [w for w in v if not w.startswith("raw")]:
    base = v["raw-8" if which.endswith("-one") else f"raw-{readers}"]
    for i, (r, b) in enumerate(zip(v[which], base)):
        print(f"| {which} | {i + 1} | {r[0]:.2f} | {b[0] / r[0]:.2f} | "
              f"{r[4][0]:.2f} | {r[4][1]:.2f} | {r[4][2]:.2f} | {r[4][3]:.2f} |")
PY
