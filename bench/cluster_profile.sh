#!/usr/bin/env bash
# bench/cluster_profile.sh - where a cluster's creates go (issue 32): N
# gateways on one fresh PostgreSQL database and one file store, one
# create load, and what it cost, per create.
#
#   bench/cluster_profile.sh [--gateways N] [--files N] [--threads N]
#                            [--statements]
#
# mapfs-bench creates --files files in each of --threads directories (16
# in flight each, thread i on gateway i mod N).  Printed for the create
# item alone (counters read before and after it):
#   - the rate;
#   - cluster commits and local LMDB commits (each gateway's metrics), and
#     PostgreSQL's transactions (commits, the followers' reads of the log,
#     NOTIFYs: pg_stat_database) and WAL bytes;
#   - bytes written to the disk by the gateways and by PostgreSQL
#     (/proc/PID/io write_bytes) and their CPU (utime + stime);
#   - voluntary context switches by thread name (the gateways' threads are
#     named: db-writer, db-commit-N, db-follow, db-notify, rpc-loop-N...;
#     PostgreSQL's backends as postgres).
# With --statements, PostgreSQL runs with pg_stat_statements (every
# statement, those inside mapfs_commit3() too) and the ones that cost
# the most during the create are listed: calls and microseconds of
# execution per create, per call.
# Makes no assertions; one run (compare builds with GW=, alternating).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
GW=${GW:-$ROOT/build/mapfs-gw}
BENCH=${BENCH:-$ROOT/build/bench/mapfs-bench}
N=3 FILES=2000 THREADS=3 STATEMENTS=0
while [ $# -gt 0 ]; do
	case $1 in
	--gateways) N=$2; shift ;;
	--files) FILES=$2; shift ;;
	--threads) THREADS=$2; shift ;;
	--statements) STATEMENTS=1 ;;
	-h|--help) sed -n '2,26p' "$0"; exit 0 ;;
	*) echo "cluster_profile.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[ -x "$GW" ] && [ -x "$BENCH" ] || { echo "cluster_profile.sh: build first (cmake --build build)" >&2; exit 1; }

WORK=$(mktemp -d /var/tmp/mapfs-profile.XXXXXX)
PIDS=()
PGDIR=
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	[ -n "$PGDIR" ] && "$ROOT/tests/pg/pg.sh" stop "$PGDIR" >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT

pg_opts=
[ "$STATEMENTS" = 1 ] && pg_opts="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
env_text=$(MAPFS_PG_WATCH_PID=$$ MAPFS_PG_OPTS="$pg_opts" "$ROOT/tests/pg/pg.sh" start)
eval "$env_text"
PGDIR=$MAPFS_PG_DIR
meta=$("$ROOT/tests/pg/pg.sh" createdb "$PGDIR" profile)
psql_val() {
	runuser -u "$(stat -c %U "$PGDIR")" -- /usr/lib/postgresql/15/bin/psql -X -At \
		-h "$PGDIR" -p "$MAPFS_PG_PORT" -U mapfs -d profile -c "$1"
}

urls=() mports=()
for i in $(seq 0 $((N - 1))); do
	d=$WORK/g$i
	mkdir -p "$d/state"
	mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	"$GW" --state "$d/state" --store "file://$WORK/store" --bind 127.0.0.1 \
		--nfs-port 0 --mount-port 0 --no-rpcbind --foreground --threads 1 \
		--log-level warn --metrics "127.0.0.1:$mport" --meta "$meta" --node "n$i" \
		>"$d/out" 2>"$d/err" &
	PIDS+=($!)
	for _ in $(seq 300); do grep -q ready "$d/out" && break; sleep 0.1; done
	nfs=$(sed -n 's/.*nfs=127.0.0.1:\([0-9]*\).*/\1/p' "$d/out")
	mnt=$(sed -n 's/.*mount=127.0.0.1:\([0-9]*\).*/\1/p' "$d/out")
	[ -n "$nfs" ] || { cat "$d/err" >&2; exit 1; }
	urls+=("nfs://127.0.0.1/mapfs?nfsport=$nfs&mountport=$mnt&version=3")
	mports+=("$mport")
done

# Every counter as "name value" lines.
pg_pids() {
	local pm
	pm=$(head -1 "$PGDIR/data/postmaster.pid")
	echo "$pm" $(pgrep -P "$pm")
}
counters() {
	local p t f
	for p in "${mports[@]}"; do
		curl -s "http://127.0.0.1:$p/metrics" |
			sed -n 's/^\(mapfs_cluster_commits_total\|mapfs_db_commits_total\) \([0-9]*\)$/\1 \2/p'
	done
	for p in "${PIDS[@]}"; do
		echo "gw_write_bytes $(awk '/^write_bytes/{print $2}' "/proc/$p/io")"
		f=$(cut -d' ' -f14,15 "/proc/$p/stat")
		echo "gw_ticks $((${f% *} + ${f#* }))"
		for t in /proc/"$p"/task/*; do
			echo "cs:$(tr ' ' _ <"$t/comm") $(awk '/^voluntary_ctxt/{print $2}' "$t/status")"
		done
	done
	for p in $(pg_pids); do
		[ -r "/proc/$p/io" ] || continue
		echo "pg_write_bytes $(awk '/^write_bytes/{print $2}' "/proc/$p/io")"
		f=$(cut -d' ' -f14,15 "/proc/$p/stat" 2>/dev/null) || continue
		echo "pg_ticks $((${f% *} + ${f#* }))"
		echo "cs:postgres $(awk '/^voluntary_ctxt/{print $2}' "/proc/$p/status")"
	done
	echo "pg_wal_bytes $(psql_val "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")"
}
# PostgreSQL's transactions: its statistics reach pg_stat_database within
# a second of them, so read a second later (the rest is read at once: the
# uploads of the new files follow the creates).
xacts() {
	sleep 1
	echo "pg_xacts $(psql_val "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")"
}

[ "$STATEMENTS" = 1 ] && psql_val "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
statements() {
	[ "$STATEMENTS" = 1 ] || return 0
	psql_val "SELECT calls, round(total_exec_time * 1000), regexp_replace(left(query, 90), '\s+', ' ', 'g')
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
}
statements >"$WORK/st_before"
xacts >"$WORK/before"
counters >>"$WORK/before"
"$BENCH" -p "$THREADS" -q 16 --small-file-count "$FILES" --keep --items create --json \
	"${urls[@]}" >"$WORK/create.json"
counters >"$WORK/after"
xacts >>"$WORK/after"
statements >"$WORK/st_after"

python3 - "$WORK/before" "$WORK/after" "$WORK/create.json" "$N" "$(getconf CLK_TCK)" \
	"$WORK/st_before" "$WORK/st_after" <<'EOF'
import collections, json, sys
def read(path):
    d = collections.Counter()
    for line in open(path):
        k, v = line.rsplit(None, 1)
        d[k] += int(float(v))
    return d
a, b = read(sys.argv[1]), read(sys.argv[2])
d = {k: b[k] - a[k] for k in b}
it = [i for i in json.load(open(sys.argv[3]))["items"] if i["name"] == "create"][0]
n, gws, hz = it["files"], int(sys.argv[4]), int(sys.argv[5])
per = lambda k: d.get(k, 0) / n
print(f"{gws} gateways, {n:,} creates at {it['value']:,.0f}/s")
print(f"  cluster commits   {d.get('mapfs_cluster_commits_total', 0):7,}  ({n / max(d.get('mapfs_cluster_commits_total', 0), 1):.1f} creates each)")
print(f"  local commits     {d.get('mapfs_db_commits_total', 0):7,}  (all gateways)")
print(f"  PostgreSQL xacts  {d.get('pg_xacts', 0):7,}  (commits, the followers' reads, NOTIFYs, leases;"
      " to a second after)")
print(f"  per create: gateways {per('gw_ticks') * 1e6 / hz:.0f} us CPU, {per('gw_write_bytes') / 1024:.1f} KiB written;"
      f" PostgreSQL {per('pg_ticks') * 1e6 / hz:.0f} us CPU, {per('pg_write_bytes') / 1024:.1f} KiB written,"
      f" {per('pg_wal_bytes') / 1024:.2f} KiB of WAL")
print("  voluntary context switches per create, by thread:")
cs = sorted(((k[3:], v) for k, v in d.items() if k.startswith("cs:") and v > 0), key=lambda kv: -kv[1])
for name, v in cs[:12]:
    print(f"    {name:16s} {v / n:6.2f}")
def stmts(path):
    d = {}
    for line in open(path):
        c, us, q = line.rstrip("\n").split("|", 2)
        k = d.setdefault(q, [0, 0])
        k[0] += int(c)
        k[1] += int(us)
    return d
sa, sb = stmts(sys.argv[6]), stmts(sys.argv[7])
rows = []
for q, (c, us) in sb.items():
    c0, us0 = sa.get(q, [0, 0])
    if c - c0 > 0:
        rows.append((us - us0, c - c0, q))
if rows:
    print("  PostgreSQL statements (pg_stat_statements, nested ones too), by time:")
    print(f"    {'calls':>8s} {'us/create':>9s} {'us/call':>8s}  statement")
    for us, c, q in sorted(rows, reverse=True)[:14]:
        print(f"    {c:8,} {us / n:9.1f} {us / c:8.1f}  {q}")
EOF
