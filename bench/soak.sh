#!/usr/bin/env bash
# bench/soak.sh - one gateway on radosgw for an hour or more, the way
# users run it: a mixed load (the JuiceFS bench items, and small files
# written, read, stat'ed, renamed and removed, a million in an hour),
# with what the process holds, the upload rate and the lag sampled every
# minute, drawn as a picture and written as a table.  A cycle writes a
# directory of small files; RENAME_LAG cycles later they are renamed,
# REMOVE_LAG cycles later removed, so each reaches the store first.
# MINUTES=60 at RATE=150 is ~540,000 files; a million takes 110 minutes.  Each resource must
# stay flat and the lag bounded, or the soak fails (issue 50).
#
# usage: bench/soak.sh [MINUTES] (default 60)
#   env: OUT=DIR (bench/soak-out), SAMPLE_S=60, FILES=500 small files per
#        client and cycle, CLIENTS=8, SMALL=4K, RATE=150 new small files
#        a second on average (each costs the store a PUT, a COPY and two
#        DELETEs: radosgw on this 2-core box, shared with the gateway and
#        the clients, keeps up with about 250; a million an hour is 278), GW=build/mapfs-gw,
#        BENCH=build/bench/mapfs-bench, GW_ARGS (default: none, the
#        defaults users get), RENAME_LAG=4 and REMOVE_LAG=8 cycles,
#        MAPFS_RGW_STORE_GB=8 (radosgw's memstore)
# Writes OUT/soak.tsv (a row per sample), OUT/soak.png, OUT/summary.md,
# OUT/gw.err (the gateway's log); exits 1 if a check fails.
#
# The checks (after the first 10% of the run, the warm-up): in the last
# quarter against the second, the lowest descriptors (+64), threads (+8)
# and reader slots (+4), which come and go with each pass, and the
# highest resident memory and LMDB pages (+25% or 32/16 MiB); the upload lag and the queued store work stay under
# LAG_MAX_S (120) and QUEUE_MAX (20,000); and once the load stops,
# `mapfs-gw flush` empties the backlog.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MINUTES=${1:-60}
OUT=${OUT:-$ROOT/bench/soak-out}
SAMPLE_S=${SAMPLE_S:-60}
FILES=${FILES:-500}
CLIENTS=${CLIENTS:-8}
SMALL=${SMALL:-4K}
RATE=${RATE:-150}
GW=${GW:-$ROOT/build/mapfs-gw}
BENCH=${BENCH:-$ROOT/build/bench/mapfs-bench}
GW_ARGS=${GW_ARGS:-}
LAG_MAX_S=${LAG_MAX_S:-120}
QUEUE_MAX=${QUEUE_MAX:-20000}
export MAPFS_RGW_STORE_GB=${MAPFS_RGW_STORE_GB:-8}
for t in "$GW" "$BENCH"; do
	[ -x "$t" ] || { echo "soak: $t missing (./dev test builds it)" >&2; exit 2; }
done
command -v gnuplot >/dev/null || {
	echo "soak: installing gnuplot-nox (the picture)" >&2
	apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null
}
mkdir -p "$OUT"
rm -f "$OUT"/soak.tsv "$OUT"/soak.png "$OUT"/summary.md

. "$ROOT/bench/rgw_lib.sh"
rgw_setup soak
# shellcheck disable=SC2086
LOGLEVEL=info gw_start "$GW" "$WORK/gw" soak --threads 2 \
	--metrics 127.0.0.1:0 $GW_ARGS
METRICS=$(sed -n 's/.*metrics=\([^ ]*\).*/\1/p' "$WORK/gw/out")
[ -n "$METRICS" ] || { echo "soak: no metrics address" >&2; exit 1; }
echo "soak: ${MINUTES} min, radosgw memstore, gateway $GW ${GW_ARGS:-(defaults)}," \
	"$CLIENTS clients x $FILES files of $SMALL per cycle, $RATE files/s, a sample every ${SAMPLE_S} s"

# ---- the sampler: one row of the table per SAMPLE_S ----------------------
COLS="min fds threads rss_mib readers map_mib ckpt_age_s dirty_files queued lag_s uploads_per_s put_mib_per_s files_done"
echo "$COLS" | tr ' ' '\t' > "$OUT/soak.tsv"
scrape() {
	curl -sf --max-time 20 "http://$METRICS/metrics" | awk '
		/^mapfs_open_fds /            { fds = $2 }
		/^mapfs_threads /             { th = $2 }
		/^mapfs_resident_memory_bytes / { rss = $2 }
		/^mapfs_db_readers /          { rd = $2 }
		/^mapfs_db_map_used_bytes /   { map = $2 }
		/^mapfs_db_log_checkpoint_age_seconds / { ck = $2 }
		/^mapfs_dirty_files /         { df = $2 }
		/^mapfs_store_pending_ops /   { q = $2 }
		/^mapfs_upload_lag_seconds /  { lag = $2 }
		/^mapfs_store_requests_total\{op="(put|multipart|copy|delete)"\}/ { ups += $2 }
		/^mapfs_store_bytes_total\{op="(put|multipart)"\}/ { bytes += $2 }
		END { printf "%d %d %.1f %d %.1f %.1f %d %d %.0f %d %d\n",
			fds, th, rss / 1048576, rd, map / 1048576, ck, df, q,
			lag, ups, bytes }'
}
T0=$(date +%s)
sampler() {
	local prev_ups=0 prev_bytes=0 prev_t=$T0 n=0
	while :; do
		local now s ups bytes done_files
		now=$(date +%s)
		s=$(scrape) || s=""
		if [ -n "$s" ]; then
			set -- $s
			ups=${10} bytes=${11}
			done_files=$(cat "$WORK/files_done" 2>/dev/null || echo 0)
			if [ "$n" -gt 0 ]; then
				awk -v m="$(( (now - T0) ))" -v dt="$((now - prev_t))" \
					-v u="$((ups - prev_ups))" -v b="$((bytes - prev_bytes))" \
					-v f="$done_files" -v s="$s" 'BEGIN {
					split(s, a, " ");
					printf "%.1f\t%d\t%d\t%.1f\t%d\t%.1f\t%.1f\t%d\t%d\t%.0f\t%.1f\t%.2f\t%d\n",
						m / 60, a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9],
						u / dt, b / dt / 1048576, f }' >> "$OUT/soak.tsv"
			fi
			prev_ups=$ups prev_bytes=$bytes prev_t=$now n=$((n + 1))
		fi
		sleep "$SAMPLE_S" & wait $!
	done
}
sampler &
SAMPLER=$!
PIDS+=($SAMPLER)

# ---- the load --------------------------------------------------------------
echo 0 > "$WORK/files_done"
END=$((T0 + MINUTES * 60))
cycle=0 done_files=0 fails=0
RENAME_LAG=${RENAME_LAG:-4} REMOVE_LAG=${REMOVE_LAG:-8}
# mapfs-bench on the small files of directory $1 (further arguments its).
run_small() {
	local dir=$1
	shift
	"$BENCH" -p "$CLIENTS" -q 8 --small-file-count "$FILES" \
		--small-file-size "$SMALL" --no-verify --dir "$dir" "$@" "$NFS_URL" \
		> "$WORK/small.log" 2>&1 && return 0
	fails=$((fails + 1))
	tail -3 "$WORK/small.log" >&2
	return 1
}
while [ "$(date +%s)" -lt "$END" ]; do
	cycle=$((cycle + 1))
	c0=$(date +%s%N)
	# Small files through their life: written (CREATE, WRITE, COMMIT),
	# read and stat'ed; RENAME_LAG cycles later renamed, REMOVE_LAG
	# cycles later removed, so that each is in the store (a PUT, then
	# a COPY and a DELETE, then a DELETE) before the next step.
	run_small "small$cycle" --keep --items write-small,read-small,stat &&
		done_files=$((done_files + CLIENTS * FILES))
	echo "$done_files" > "$WORK/files_done"
	[ "$cycle" -le "$RENAME_LAG" ] ||
		run_small "small$((cycle - RENAME_LAG))" --keep --reuse --items rename
	[ "$cycle" -le "$REMOVE_LAG" ] ||
		run_small "small$((cycle - REMOVE_LAG))" --reuse --renamed --items remove
	# Every fourth cycle the JuiceFS bench's items: big files (1 MiB
	# blocks), small files of 128 KiB, stat.
	if [ $((cycle % 4)) = 0 ]; then
		"$BENCH" -p 4 --items write-big,read-big,write-small,read-small,stat \
			--big-file-size 64M --block-size 1M --small-file-count 100 \
			--small-file-size 128K --dir "jfs$cycle" "$NFS_URL" \
			> "$WORK/jfs.log" 2>&1 || { fails=$((fails + 1)); tail -3 "$WORK/jfs.log" >&2; }
	fi
	# Paced: RATE new small files a second, on average.
	left_ms=$(( CLIENTS * FILES * 1000 / RATE - ($(date +%s%N) - c0) / 1000000 ))
	[ "$left_ms" -le 0 ] || sleep "$(awk -v m="$left_ms" 'BEGIN { printf "%.3f", m / 1000 }')"
	if [ $((cycle % 20)) = 0 ]; then
		echo "soak: $(( ($(date +%s) - T0) / 60 )) min, $done_files small files, $fails failed runs"
	fi
done
LOAD_S=$(( $(date +%s) - T0 ))
echo "soak: load done after $LOAD_S s: $done_files small files in $cycle cycles, $fails failed runs"

# ---- the drain ------------------------------------------------------------
t=$(date +%s)
flush_ok=1
"$GW" flush --state "$WORK/gw/state" > "$WORK/flush.out" 2>&1 || flush_ok=0
DRAIN_S=$(( $(date +%s) - t ))
cat "$WORK/flush.out"
sleep "$SAMPLE_S"    # one more sample, after the drain
kill "$SAMPLER" 2>/dev/null || true
wait "$SAMPLER" 2>/dev/null || true
cp "$WORK/gw/err" "$OUT/gw.err"
"$GW" ctl --state "$WORK/gw/state" status > "$OUT/status.txt" 2>&1 || true

# ---- the checks -----------------------------------------------------------
checks=$(awk -F'\t' -v lagmax="$LAG_MAX_S" -v qmax="$QUEUE_MAX" '
	NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
	{ n++; for (c in col) v[n, c] = $(col[c]) }
	function hi(c, from, to,   i, m) { m = -1; for (i = from; i <= to; i++) if (v[i, c] > m) m = v[i, c]; return m }
	function lo(c, from, to,   i, m) { m = -1; for (i = from; i <= to; i++) if (m < 0 || v[i, c] < m) m = v[i, c]; return m }
	# What comes and goes with the load (descriptors, threads, reader
	# slots: a pass of parallel uploads holds 16 more for a moment) by
	# its floor, the lowest sample of a quarter: a leak lifts it.
	# Memory and LMDB by their highest.
	function flat(c, add, pct, floor,   a, b, lim) {
		a = floor ? lo(c, q2s, q2e) : hi(c, q2s, q2e)
		b = floor ? lo(c, q4s, n) : hi(c, q4s, n)
		lim = a + add; if (a * (1 + pct) > lim) lim = a * (1 + pct)
		printf "| %s (%s) | %s | %s | %s |\n", c, floor ? "lowest" : "highest", a, b, b <= lim ? "flat" : "GROWS"
		if (b > lim) bad++
	}
	END {
		if (n < 8) { print "| (too few samples: " n ") | | | FAIL |"; print "BAD 1"; exit }
		w = int(n / 10); if (w < 1) w = 1
		q2s = w + int((n - w) / 4); q2e = w + int((n - w) / 2); q4s = w + int(3 * (n - w) / 4)
		flat("fds", 64, 0, 1); flat("threads", 8, 0, 1); flat("readers", 4, 0, 1)
		flat("rss_mib", 32, 0.25, 0); flat("map_mib", 16, 0.25, 0)
		lag = hi("lag_s", w + 1, n - 1); q = hi("queued", w + 1, n - 1)
		printf "| lag_s (max under load) | | %s | %s |\n", lag, lag <= lagmax ? "bounded" : "TOO HIGH"
		printf "| queued (max under load) | | %s | %s |\n", q, q <= qmax ? "bounded" : "TOO HIGH"
		if (lag > lagmax) bad++; if (q > qmax) bad++
		printf "| dirty_files, queued after the drain | | %s, %s | %s |\n", v[n, "dirty_files"], v[n, "queued"], v[n, "dirty_files"] + v[n, "queued"] == 0 ? "empty" : "LEFT"
		if (v[n, "dirty_files"] + v[n, "queued"] > 0) bad++
		print "BAD " bad + 0
	}' "$OUT/soak.tsv")
bad=$(echo "$checks" | sed -n 's/^BAD //p')
[ "$flush_ok" = 1 ] || bad=$((bad + 1))

# ---- the picture ------------------------------------------------------------
gnuplot <<EOF
set terminal pngcairo size 1400,1000 font ",10"
set output "$OUT/soak.png"
set datafile separator "\t"
set key autotitle columnhead
set multiplot layout 3,3 title "mapfs-gw soak: ${MINUTES} min on radosgw, $done_files small files (x: minutes)"
set xlabel "min"
plot "$OUT/soak.tsv" using 1:2 with lines lw 2 title "open descriptors"
plot "$OUT/soak.tsv" using 1:3 with lines lw 2 title "threads"
plot "$OUT/soak.tsv" using 1:4 with lines lw 2 title "resident MiB"
plot "$OUT/soak.tsv" using 1:5 with lines lw 2 title "LMDB reader slots"
plot "$OUT/soak.tsv" using 1:6 with lines lw 2 title "LMDB MiB used"
plot "$OUT/soak.tsv" using 1:8 with lines lw 2 title "dirty files", "" using 1:9 with lines lw 2 title "queued store ops"
plot "$OUT/soak.tsv" using 1:10 with lines lw 2 title "upload lag (s)"
plot "$OUT/soak.tsv" using 1:11 with lines lw 2 title "store writes/s"
plot "$OUT/soak.tsv" using 1:12 with lines lw 2 title "MiB/s uploaded"
unset multiplot
EOF

{
	echo "soak $(date -u +%FT%TZ), head $(git -C "$ROOT" rev-parse --short HEAD): ${MINUTES} min of load on radosgw (memstore),"
	echo "$done_files small files of $SMALL written, read, stat'ed, renamed ${RENAME_LAG} cycles and removed ${REMOVE_LAG} cycles later ($cycle cycles, $CLIENTS clients,"
	echo "$fails failed runs), the JuiceFS items every 4th cycle; gateway options \`${GW_ARGS:-(defaults)}\`; drain (flush) ${DRAIN_S} s."
	echo
	echo "| series | 2nd quarter | last quarter | verdict |"
	echo "|---|---|---|---|"
	echo "$checks" | grep '^|'
	echo
	echo "Samples (every ${SAMPLE_S} s): \`$OUT/soak.tsv\`; picture: \`$OUT/soak.png\`."
} > "$OUT/summary.md"
cat "$OUT/summary.md"
column -t "$OUT/soak.tsv" | head -5
if [ "$bad" -gt 0 ] || [ "$fails" -gt 0 ]; then
	echo "soak: FAIL ($bad checks, $fails failed runs)"
	exit 1
fi
echo "soak: PASS"
