#!/usr/bin/env bash
# bench/cluster.sh - the namespace on PostgreSQL against LMDB (issues 15
# and 32), side by side in one run.
#
#   bench/cluster.sh [--rounds N] [--files N] [--readdir N] [--duration S]
#                    [--threads N] [--keep]
#
# Configurations, interleaved round by round (this VM's figures drift
# between rounds; medians are printed):
#   lmdb  one gateway, namespace in LMDB (the default)
#   pg1   one gateway, namespace in PostgreSQL (a one-node cluster)
#   pg2   two gateways on one PostgreSQL and one store
#   pg3   three gateways
# Every gateway has --threads 1 and its own fresh state; all share one
# file store; PostgreSQL is durable (fsync, synchronous_commit on).
# mapfs-bench runs --threads client connections spread over the gateways
# (thread i on gateway i mod N) with the items create, lookup, getattr
# (rates; lookup and getattr after `ctl flush` of every gateway, so the
# creates' uploads do not share the CPUs), visibility (CREATE on one
# gateway to the first LOOKUP that finds it on the next: the
# cross-gateway window; on one gateway it is a second connection to it),
# then readdir of one directory of --readdir entries (made untimed).
# Client, gateways and PostgreSQL share this machine's CPUs, so also:
#   - CPU microseconds per create of the gateways and of PostgreSQL (its
#     postmaster and backends) during the create item: what carries to
#     a bigger machine;
#   - the followers' apply lag during the create item (each gateway's
#     mapfs_cluster_apply_lag_seconds histogram, summed: bucket bounds);
#   - the visibility window again while --threads clients create at full
#     rate on every gateway (pg2, pg3);
#   - PostgreSQL alone: pgbench running the create commit of
#     bench/pg_create.sql (one create's four records, mapfs_commit3) on
#     as many connections as the gateways' committers (4 each), with
#     their session settings.
# Makes no assertions.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
GW=${GW:-$ROOT/build/mapfs-gw}
BENCH=${BENCH:-$ROOT/build/bench/mapfs-bench}
ROUNDS=3 FILES=2000 READDIR=100000 DURATION=3 THREADS=3 KEEP=0
CONFIGS=${CONFIGS:-"lmdb pg1 pg2 pg3"}
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$2; shift ;;
	--files) FILES=$2; shift ;;
	--readdir) READDIR=$2; shift ;;
	--duration) DURATION=$2; shift ;;
	--threads) THREADS=$2; shift ;;
	--keep) KEEP=1 ;;
	-h|--help) sed -n '2,35p' "$0"; exit 0 ;;
	*) echo "cluster.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[ -x "$GW" ] && [ -x "$BENCH" ] || { echo "cluster.sh: build first (cmake --build build)" >&2; exit 1; }

# A gateway's committers' session settings (db/pg_commit.c).
COMMIT_SESSION="-c lock_timeout=1s -c enable_seqscan=off -c enable_hashjoin=off"
COMMIT_SESSION+=" -c enable_mergejoin=off -c plan_cache_mode=force_generic_plan"
WORK=$(mktemp -d /var/tmp/mapfs-cluster.XXXXXX)
PIDS=()
PGDIR=
stop_gws() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	PIDS=()
}
cleanup() {
	stop_gws
	[ -n "$PGDIR" ] && "$ROOT/tests/pg/pg.sh" stop "$PGDIR" >/dev/null 2>&1 || true
	[ $KEEP = 1 ] && echo "cluster.sh: kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT

env_text=$(MAPFS_PG_WATCH_PID=$$ "$ROOT/tests/pg/pg.sh" start)
eval "$env_text"
PGDIR=$MAPFS_PG_DIR
echo "cluster.sh: PostgreSQL at $MAPFS_PG_URL" >&2

# start_gw DIR [META NODE]: a gateway in the background; its URL appended
# to urls.  (Not in a $(...) subshell: PIDS must reach stop_gws.)
start_gw() {
	local d=$1 meta=${2:-} node=${3:-}
	mkdir -p "$d/state"
	local mport
	mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	local args=(--state "$d/state" --store "file://$WORK/store-$round-$cfg" --bind 127.0.0.1
		--nfs-port 0 --mount-port 0 --no-rpcbind --foreground --threads 1
		--log-level warn --metrics "127.0.0.1:$mport")
	[ -z "$meta" ] || args+=(--meta "$meta" --node "$node")
	"$GW" "${args[@]}" >"$d/out" 2>"$d/err" &
	PIDS+=($!)
	for _ in $(seq 300); do grep -q ready "$d/out" && break; sleep 0.1; done
	local nfs mnt
	nfs=$(sed -n 's/.*nfs=127.0.0.1:\([0-9]*\).*/\1/p' "$d/out")
	mnt=$(sed -n 's/.*mount=127.0.0.1:\([0-9]*\).*/\1/p' "$d/out")
	[ -n "$nfs" ] || { cat "$d/err" >&2; exit 1; }
	dirs+=("$d")
	mports+=("$mport")
	urls+=("nfs://127.0.0.1/mapfs?nfsport=$nfs&mountport=$mnt&version=3")
}

psql_do() { # DB ARGS...: as PostgreSQL's own user, on its socket
	local db=$1
	shift
	runuser -u "$(stat -c %U "$PGDIR")" -- /usr/lib/postgresql/15/bin/psql -X -q \
		-h "$PGDIR" -p "$MAPFS_PG_PORT" -U mapfs -d "$db" "$@" >/dev/null
}

# CPU ticks (utime + stime) of the processes named.
ticks() {
	local t=0 p f
	for p in "$@"; do
		f=$(cut -d' ' -f14,15 "/proc/$p/stat" 2>/dev/null) || continue
		t=$((t + ${f% *} + ${f#* }))
	done
	echo $t
}
# PostgreSQL's processes: the postmaster and its children.
pg_pids() {
	local pm
	pm=$(head -1 "$PGDIR/data/postmaster.pid")
	echo "$pm" $(pgrep -P "$pm")
}
# The summed apply-lag histogram of the gateways: "le count" lines.
lag_scrape() {
	for p in "${mports[@]}"; do
		curl -s "http://127.0.0.1:$p/metrics" | sed -n 's/^mapfs_cluster_apply_lag_seconds_bucket{le="\([^"]*\)"} \([0-9]*\)$/\1 \2/p'
	done | awk '{s[$1] += $2} END {for (k in s) print k, s[k]}'
}
HZ=$(getconf CLK_TCK)

RES=$WORK/results.tsv
: >"$RES"
for round in $(seq "$ROUNDS"); do
	for cfg in $CONFIGS; do
		mkdir -p "$WORK/store-$round-$cfg"
		urls=() dirs=() mports=() meta=
		case $cfg in
		lmdb) start_gw "$WORK/$round-$cfg-0" ;;
		pg*)
			n=${cfg#pg}
			meta=$("$ROOT/tests/pg/pg.sh" createdb "$PGDIR" "c${round}_$cfg")
			for i in $(seq 0 $((n - 1))); do
				start_gw "$WORK/$round-$cfg-$i" "$meta" "n$i"
			done
			;;
		esac
		# --keep: each configuration has a fresh store and state anyway.
		gt0=$(ticks "${PIDS[@]}") pt0=$(ticks $(pg_pids))
		"$BENCH" -p "$THREADS" -q 16 --duration "$DURATION" --small-file-count "$FILES" --keep \
			--items create --json "${urls[@]}" >"$WORK/$round-$cfg-cr.json"
		gt1=$(ticks "${PIDS[@]}") pt1=$(ticks $(pg_pids))
		[ -n "$meta" ] || pt1=$pt0
		lag_scrape >"$WORK/$round-$cfg-lag.txt"
		python3 - "$WORK/$round-$cfg-cr.json" "$cfg" "$round" $((gt1 - gt0)) $((pt1 - pt0)) "$HZ" \
			"$WORK/$round-$cfg-lag.txt" "$DURATION" >>"$RES" <<'EOF'
import json, sys
it = [i for i in json.load(open(sys.argv[1]))["items"] if i["name"] == "create"][0]
cfg, rnd, gt, pt, hz = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
files = it["value"] * float(sys.argv[8])
print(f"{cfg}\t{rnd}\tgw_us\t{gt / hz / files * 1e6:.1f}\t0\t0")
print(f"{cfg}\t{rnd}\tpg_us\t{pt / hz / files * 1e6:.1f}\t0\t0")
b = sorted((float("inf") if le == "+Inf" else float(le), int(c))
           for le, c in (l.split() for l in open(sys.argv[7]) if l.strip()))
n = b[-1][1] if b else 0
if n:
    q = lambda f: next(le for le, c in b if c >= f * n)
    mx = next(le for le, c in b if c == n)
    print(f"{cfg}\t{rnd}\tlag\t{n}\t{q(0.5) * 1e6:.0f}\t{q(0.99) * 1e6:.0f}\t{mx * 1e6:.0f}")
EOF
		# The visibility window while every gateway creates at full
		# rate (a second client beside the create load).
		if [ "${#urls[@]}" -gt 1 ]; then
			"$BENCH" -p "$THREADS" -q 16 --duration $((DURATION + 3)) --small-file-count "$FILES" --keep \
				--items create --json "${urls[@]}" >/dev/null &
			load=$!
			sleep 1
			"$BENCH" -p 1 --small-file-count 300 --keep --items visibility --json "${urls[@]}" \
				>"$WORK/$round-$cfg-visload.json"
			wait $load
			python3 - "$WORK/$round-$cfg-visload.json" "$cfg" "$round" >>"$RES" <<'EOF'
import json, sys
it = json.load(open(sys.argv[1]))["items"][0]
print("\t".join([sys.argv[2], sys.argv[3], "visibility_load", str(it["value"]),
                 str(it["latency_us"]["p50"]), str(it["latency_us"]["p99"])]))
EOF
		fi
		# Warm reads are measured on gateways at rest: the creates'
		# uploads (and their commits) would otherwise share the CPUs.
		for d in "${dirs[@]}"; do "$GW" ctl --state "$d/state" flush >/dev/null; done
		# ... and PostgreSQL's clean-up after them done now, not then.
		[ -z "$meta" ] || psql_do "c${round}_$cfg" -c "VACUUM ANALYZE" -c "CHECKPOINT"
		"$BENCH" -p "$THREADS" -q 16 --duration "$DURATION" --small-file-count "$FILES" --keep \
			--items lookup,getattr,visibility --json "${urls[@]}" \
			>"$WORK/$round-$cfg.json"
		"$BENCH" -p 1 --small-file-count "$READDIR" --keep --items readdir --json \
			"${urls[@]}" >"$WORK/$round-$cfg-rd.json"
		python3 - "$WORK/$round-$cfg-cr.json" "$WORK/$round-$cfg.json" "$WORK/$round-$cfg-rd.json" "$cfg" "$round" >>"$RES" <<'EOF'
import json, sys
for path in sys.argv[1:4]:
    for it in json.load(open(path))["items"]:
        lat = it["latency_us"]
        print("\t".join([sys.argv[4], sys.argv[5], it["name"], str(it["value"]),
                         str(lat["p50"]), str(lat["p99"])]))
EOF
		stop_gws
		# PostgreSQL alone: the gateways' create commit on as many
		# connections as their committers.
		if [ -n "$meta" ]; then
			c=$((4 * ${cfg#pg}))
			tps=$(runuser -u "$(stat -c %U "$PGDIR")" -- env PGOPTIONS="$COMMIT_SESSION" \
				/usr/lib/postgresql/15/bin/pgbench -n -M prepared \
				-f "$HERE/pg_create.sql" -c $c -j $c -T "$DURATION" \
				-h "$PGDIR" -p "$MAPFS_PG_PORT" -U mapfs "c${round}_$cfg" 2>/dev/null |
				sed -n 's/^tps = \([0-9.]*\).*/\1/p')
			printf '%s\t%s\tpgbench\t%s\t0\t0\n' "$cfg" "$round" "${tps:-0}" >>"$RES"
		fi
		# Its autovacuum must not run under the next configuration.
		[ -z "$meta" ] || psql_do postgres -c "DROP DATABASE c${round}_$cfg" -c "CHECKPOINT"
		echo "cluster.sh: round $round $cfg done" >&2
	done
done

python3 - "$RES" "$(nproc)" "$THREADS" "$READDIR" <<'EOF'
import sys, statistics, collections
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[1]) if l.strip()]
cfgs = []
vals = collections.defaultdict(list)
lat = collections.defaultdict(list)
lags = collections.defaultdict(list)
for r in rows:
    if r[2] == "lag":
        lags[r[0]].append([float(x) for x in r[3:7]])
        continue
    cfg, rnd, item, v, p50, p99 = r
    if cfg not in cfgs:
        cfgs.append(cfg)
    vals[(item, cfg)].append(float(v))
    lat[(item, cfg)].append((float(p50), float(p99)))
items = ["create", "lookup", "getattr", "readdir", "visibility"]
unit = {"create": "files/s", "lookup": "ops/s", "getattr": "ops/s",
        "readdir": "entries/s", "visibility": "files/s"}
print(f"medians of {len(set(r[1] for r in rows))} rounds; {sys.argv[3]} client threads "
      f"spread over the gateways; readdir of {int(sys.argv[4]):,} entries; "
      f"{sys.argv[2]} CPUs shared by client, gateways and PostgreSQL")
head = ["item"] + cfgs + [f"{c}/lmdb" for c in cfgs if c != "lmdb"]
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for item in items:
    if not any((item, c) in vals for c in cfgs):
        continue
    med = {c: statistics.median(vals[(item, c)]) for c in cfgs if (item, c) in vals}
    cells = [f"{item} ({unit[item]})"] + [f"{med.get(c, 0):,.0f}" for c in cfgs]
    base = med.get("lmdb")
    cells += [f"{med[c] / base:.2f}" if base and c in med else "-" for c in cfgs if c != "lmdb"]
    print("| " + " | ".join(cells) + " |")
print()
print("visibility window (CREATE reply on one gateway to the first LOOKUP that finds it on the next), medians of the rounds' p50 / p99:")
for c in cfgs:
    if ("visibility", c) in lat:
        p50 = statistics.median(x[0] for x in lat[("visibility", c)])
        p99 = statistics.median(x[1] for x in lat[("visibility", c)])
        print(f"  {c}: p50 {p50 / 1000:.2f} ms, p99 {p99 / 1000:.2f} ms")
print()
print("while every gateway creates at full rate, the visibility window, medians of the rounds' p50 / p99:")
for c in cfgs:
    if ("visibility_load", c) in lat:
        p50 = statistics.median(x[0] for x in lat[("visibility_load", c)])
        p99 = statistics.median(x[1] for x in lat[("visibility_load", c)])
        print(f"  {c}: p50 {p50 / 1000:.2f} ms, p99 {p99 / 1000:.2f} ms")
print()
print("per create, CPU of the gateways and of PostgreSQL (medians); PostgreSQL alone; the followers' apply lag in the create item:")
print("| config | creates/s | gateways us/create | PostgreSQL us/create | pgbench create commits/s (4 connections per gateway) | apply lag p50 / p99 / max, ms (bucket bounds; commits) |")
print("|---|---:|---:|---:|---:|---|")
for c in cfgs:
    med = lambda item: statistics.median(vals[(item, c)]) if (item, c) in vals else 0
    lag = "-"
    if lags.get(c):
        n = sum(x[0] for x in lags[c])
        lag = (f"{statistics.median(x[1] for x in lags[c]) / 1000:g} / "
               f"{statistics.median(x[2] for x in lags[c]) / 1000:g} / "
               f"{max(x[3] for x in lags[c]) / 1000:g} ({n:,.0f})")
    pgb = f"{med('pgbench'):,.0f}" if ("pgbench", c) in vals else "-"
    print(f"| {c} | {med('create'):,.0f} | {med('gw_us'):.0f} | {med('pg_us'):.0f} | {pgb} | {lag} |")
EOF
