#!/usr/bin/env bash
# tests/ops/test_monitoring.sh - issue 37: what an operator loads works.
#   1. the alert rules: `promtool check rules`, and `promtool test rules`
#      (tests/ops/alerts.test.yml: every alert fires on one gateway's
#      series and not on another's, with the words an operator reads);
#   2. the Grafana dashboard: valid JSON, every expression parses (as a
#      recording rule, by promtool), and every metric the dashboard or
#      the rules name is exported by a running gateway: one on LMDB and
#      one on PostgreSQL (a cluster of one) are scraped;
#   3. `mapfs-gw ctl stats`: a few intervals under load, then idle: the
#      figures move with the load, under a terminal too (script(1)).
#
# usage: test_monitoring.sh BUILD_DIR   (needs promtool from Debian's
#         prometheus package, python3, curl, nfs-cp, nfs-cat; exit 77 if
#         promtool is missing)
set -euo pipefail

BUILD=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
GW="$BUILD/mapfs-gw"
RULES="$ROOT/etc/prometheus/mapfs-gw-alerts.yml"
DASH="$ROOT/etc/grafana/mapfs-gw.json"
T=$(mktemp -d /tmp/mapfs-mon.XXXXXX)
PIDS=()
PGDIR=

cleanup() {
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	[ -z "$PGDIR" ] || "$ROOT/tests/pg/pg.sh" stop "$PGDIR" >/dev/null 2>&1 || true
	rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

if ! command -v promtool >/dev/null; then
	echo "SKIPPED: promtool is missing (apt-get install prometheus; ./dev installs it)"
	exit 77
fi
for tool in python3 curl nfs-cp nfs-cat; do
	command -v "$tool" >/dev/null || fail "$tool is missing (./dev installs it)"
done

step "alert rules: promtool check rules, promtool test rules"
promtool check rules "$RULES" || fail "the rules do not load"
(cd "$HERE" && promtool test rules alerts.test.yml) || fail "an alert's unit test failed"

step "dashboard: JSON, expressions, metric names"
# Every target's expression as a recording rule (Grafana's variables
# replaced), and the metric names it and the alert rules use.
python3 - "$DASH" "$RULES" "$T" <<'PY' || fail "the dashboard is not what Grafana loads"
import json, re, sys
dash = json.load(open(sys.argv[1]))
exprs = []
def walk(ps):
    for p in ps:
        walk(p.get("panels", []))
        for t in p.get("targets", []):
            exprs.append((p["title"], t["expr"]))
walk(dash["panels"])
assert dash["uid"] and dash["title"] and len(exprs) >= 20, "too few panels"
names = set()
with open(sys.argv[3] + "/dash_rules.yml", "w") as f:
    f.write("groups:\n  - name: dashboard\n    rules:\n")
    for i, (title, e) in enumerate(exprs):
        e = e.replace("$__rate_interval", "5m").replace("$instance", ".*")
        assert "$" not in e, f"{title}: unknown variable in {e}"
        f.write(f"      - record: dashboard:expr{i}\n        expr: {json.dumps(e)}\n")
        names.update(re.findall(r"\bmapfs_[a-z0-9_]+", e))
names.update(re.findall(r"\bmapfs_[a-z0-9_]+", open(sys.argv[2]).read()))
open(sys.argv[3] + "/names", "w").write("\n".join(sorted(names)) + "\n")
print(f"{len(exprs)} expressions, {len(names)} metric names")
PY
promtool check rules "$T/dash_rules.yml" >/dev/null ||
	{ promtool check rules "$T/dash_rules.yml"; fail "a dashboard expression does not parse"; }

# A gateway with metrics: $1 a name, the rest its extra options.  Sets
# NFS, MNT, METRICS; the gateway's pid goes to PIDS.
start_gw() {
	local name=$1; shift
	mkdir -p "$T/$name"
	"$GW" --state "$T/$name" --export /mapfs --foreground --no-rpcbind \
		--nfs-port 0 --mount-port 0 --nlm-port 0 --upload-delay 0 \
		--metrics 127.0.0.1:0 "$@" > "$T/$name.out" 2> "$T/$name.err" &
	PIDS+=($!)
	for _ in $(seq 100); do
		grep -q "ready" "$T/$name.out" 2>/dev/null && break
		kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$T/$name.err" >&2; fail "$name did not start"; }
		sleep 0.1
	done
	NFS=$(sed -n 's/.*nfs=[^ ]*:\([0-9]*\) .*/\1/p' "$T/$name.out")
	MNT=$(sed -n 's/.*mount=[^ ]*:\([0-9]*\) .*/\1/p' "$T/$name.out")
	METRICS=$(sed -n 's/.*metrics=\([^ ]*\).*/\1/p' "$T/$name.out")
	[ -n "$NFS" ] && [ -n "$METRICS" ] || fail "$name: no ready line"
}

# Scrape after a little I/O, with a client connection held open (for
# the per-host gauge): the names exported, into $T/$1.names.
scrape() {
	local name=$1 url="nfs://127.0.0.1/mapfs/m-$1?nfsport=$NFS&mountport=$MNT"
	head -c 300000 /dev/urandom > "$T/data"
	nfs-cp "$T/data" "$url" >/dev/null || fail "$name: nfs-cp"
	nfs-cat "$url" | cmp -s - "$T/data" || fail "$name: read back"
	exec 3<>"/dev/tcp/127.0.0.1/$NFS"
	curl -sf "http://$METRICS/metrics" > "$T/$name.metrics" || fail "$name: scrape"
	exec 3>&-
	sed -n 's/^\(mapfs_[a-z0-9_]*\).*/\1/p' "$T/$name.metrics" | sort -u > "$T/$name.names"
}

start_gw lmdb
scrape lmdb
eval "$("$ROOT/tests/pg/pg.sh" start)"
PGDIR=$MAPFS_PG_DIR
start_gw pg --meta "$MAPFS_PG_URL" --node mon1 --store "file://$T/cstore"
PG_NFS=$NFS PG_MNT=$MNT
scrape pg
missing=0
while read -r n; do
	case $n in
	mapfs_cluster_*) want="pg" ;;
	*) want="lmdb pg" ;;
	esac
	for e in $want; do
		# (a histogram is named by its _bucket, _sum and _count lines)
		grep -qx -e "$n" -e "${n}_bucket" "$T/$e.names" ||
			{ echo "  $n: not exported by the gateway on $e" >&2; missing=1; }
	done
done < "$T/names"
[ $missing = 0 ] || fail "the dashboard or the rules name metrics a gateway does not export"
grep -q '^mapfs_client_connections{host="127.0.0.1"} 1' "$T/lmdb.metrics" ||
	fail "mapfs_client_connections does not count the connection held open"
grep -q '^mapfs_cluster_lease_held 1' "$T/pg.metrics" ||
	fail "the cluster gateway does not say it holds its lease"

step "ctl stats: figures move with the load"
SOCK_STATE="$T/lmdb"
url="nfs://127.0.0.1/mapfs/load?nfsport=$NFS&mountport=$MNT"
# (the LMDB gateway's ports, read again)
NFS=$(sed -n 's/.*nfs=[^ ]*:\([0-9]*\) .*/\1/p' "$T/lmdb.out")
MNT=$(sed -n 's/.*mount=[^ ]*:\([0-9]*\) .*/\1/p' "$T/lmdb.out")
head -c 2000000 /dev/urandom > "$T/load"
(
	end=$((SECONDS + 4))
	i=0
	while [ $SECONDS -lt $end ]; do
		u="nfs://127.0.0.1/mapfs/load$i?nfsport=$NFS&mountport=$MNT"
		nfs-cp "$T/load" "$u" >/dev/null && nfs-cat "$u" > /dev/null
		i=$((i + 1))
	done
) &
LOAD=$!
"$GW" ctl --state "$SOCK_STATE" stats --interval 1 --count 3 > "$T/stats.busy" ||
	fail "ctl stats under load"
wait $LOAD
sleep 2
"$GW" ctl --state "$SOCK_STATE" stats --interval 0.5 --count 2 > "$T/stats.idle" ||
	fail "ctl stats idle"
cat "$T/stats.busy" "$T/stats.idle"
python3 - "$T/stats.busy" "$T/stats.idle" <<'PY' || fail "ctl stats does not follow the load"
import sys
def rows(path):
    lines = open(path).read().split("\n")
    head = lines[0].split()
    out = []
    for l in lines[1:]:
        if l.strip() and not l.startswith("time"):
            out.append(dict(zip(head, l.split())))
    return out
busy, idle = rows(sys.argv[1]), rows(sys.argv[2])
assert len(busy) == 3 and len(idle) == 2, (len(busy), len(idle))
peak = max(float(r["read/s"]) + float(r["write/s"]) for r in busy)
assert peak > 5, f"under load at most {peak} reads+writes/s"
assert max(float(r["change/s"]) for r in busy) > 0, "no creates counted"
for r in idle:
    assert float(r["read/s"]) == 0 and float(r["write/s"]) == 0, f"idle but {r}"
    assert r["store"] == "up", r
print(f"peak {peak:.0f} reads+writes/s under load, 0 idle")
PY
# In a terminal (a pty), as an operator runs it.
if command -v script >/dev/null; then
	script -qec "$GW ctl --state $SOCK_STATE stats --count 1 --interval 0.2" /dev/null > "$T/stats.tty" ||
		fail "ctl stats in a terminal"
	grep -q "read/s" "$T/stats.tty" || fail "ctl stats in a terminal printed no header"
fi
"$GW" ctl --state "$SOCK_STATE" stats --count 0 >/dev/null 2>&1 && fail "--count 0 accepted"

step "ctl stats in a cluster: a line per gateway"
start_gw pg2 --meta "$MAPFS_PG_URL" --node mon2 --store "file://$T/cstore"
(
	end=$((SECONDS + 5))
	i=0
	while [ $SECONDS -lt $end ]; do
		u="nfs://127.0.0.1/mapfs/c$i?nfsport=$NFS&mountport=$MNT"
		nfs-cp "$T/load" "$u" >/dev/null && nfs-cat "$u" > /dev/null
		i=$((i + 1))
	done
) &
LOAD=$!
"$GW" ctl --state "$T/pg" stats --interval 1 --count 4 > "$T/stats.cluster" ||
	fail "ctl stats on a cluster's gateway"
wait $LOAD
cat "$T/stats.cluster"
python3 - "$T/stats.cluster" <<'PY' || fail "ctl stats does not show each gateway of the cluster"
import sys
lines = open(sys.argv[1]).read().split("\n")
head = lines[0].split()
assert head[1] == "gateway", head
rows = [dict(zip(head, l.split())) for l in lines[1:] if l.strip() and not l.startswith("time")]
names = {r["gateway"] for r in rows}
assert names == {"mon1", "mon2"}, names
busy = max(float(r["write/s"]) for r in rows if r["gateway"] == "mon2")
idle = max(float(r["write/s"]) for r in rows if r["gateway"] == "mon1")
assert busy > 5 and idle == 0, (busy, idle)
print(f"mon2 (loaded) up to {busy:.0f} writes/s, mon1 (idle) {idle:.0f}")
PY
echo "monitoring: ok"
