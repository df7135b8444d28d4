#!/usr/bin/env bash
# bench/scale.sh - how mapfs-gw scales with its event loops (issue 5: "show
# how it scales with cores").
#
#   bench/scale.sh [--loops "1 2"] [--duration S] [--items LIST] [--keep]
#
# For each N in --loops: a fresh gateway (file store, --threads N) on
# 127.0.0.1, and mapfs-bench -p N (N connections, one per loop: SO_REUSEPORT
# spreads them) running the rate items.  Prints ops/s per item and N, and
# the speed-up over the first N.  Client and gateway share the machine's
# cores, so on a 2-core box "2 loops" also means the client's two threads
# compete with the gateway's two loops: the figures show the gateway's
# share of the machine, not a gateway alone.  Makes no assertions.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
GW=${GW:-$ROOT/build/mapfs-gw}
BENCH=${BENCH:-$ROOT/build/bench/mapfs-bench}
LOOPS="1 2" DURATION=3 ITEMS=null,getattr,lookup,rand-read-4k KEEP=0
while [ $# -gt 0 ]; do
	case $1 in
	--loops) LOOPS=$2; shift ;;
	--duration) DURATION=$2; shift ;;
	--items) ITEMS=$2; shift ;;
	--keep) KEEP=1 ;;
	-h|--help) sed -n '2,13p' "$0"; exit 0 ;;
	*) echo "scale.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[ -x "$GW" ] && [ -x "$BENCH" ] || { echo "scale.sh: build first (cmake --build build)" >&2; exit 1; }

WORK=$(mktemp -d /var/tmp/mapfs-scale.XXXXXX)
GWPID=
cleanup() {
	if [ -n "$GWPID" ]; then kill "$GWPID" 2>/dev/null || true; wait "$GWPID" 2>/dev/null || true; fi
	[ $KEEP = 1 ] && echo "scale.sh: kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT

RES=$WORK/results.tsv
: >"$RES"
for n in $LOOPS; do
	d=$WORK/gw$n
	mkdir -p "$d/state" "$d/store"
	"$GW" --state "$d/state" --store "file://$d/store" --bind 127.0.0.1 \
		--nfs-port 0 --mount-port 0 --no-rpcbind --foreground \
		--threads "$n" --log-level warn >"$d/out" 2>"$d/err" &
	GWPID=$!
	for _ in $(seq 100); do grep -q ready "$d/out" && break; sleep 0.1; done
	nfs=$(sed -n 's/.*nfs=127.0.0.1:\([0-9]*\).*/\1/p' "$d/out")
	mnt=$(sed -n 's/.*mount=127.0.0.1:\([0-9]*\).*/\1/p' "$d/out")
	[ -n "$nfs" ] || { cat "$d/err" >&2; exit 1; }
	url="nfs://127.0.0.1/mapfs?nfsport=$nfs&mountport=$mnt&version=3"
	# Depth per connection as compare.sh uses: 64 for metadata, 32 for I/O.
	for item in ${ITEMS//,/ }; do
		q=64
		case $item in *-4k|*-1m) q=32 ;; esac
		"$BENCH" -p "$n" -q "$q" --duration "$DURATION" --io-file-size 64M \
			--items "$item" --json "$url" >"$d/$item.json"
		v=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["items"][0]["value"])' "$d/$item.json")
		printf '%s\t%s\t%s\n' "$item" "$n" "$v" >>"$RES"
	done
	kill "$GWPID"; wait "$GWPID" 2>/dev/null || true; GWPID=
done

python3 - "$RES" "$(nproc)" <<'EOF'
import sys, collections
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[1]) if l.strip()]
loops = []
by = collections.OrderedDict()
for item, n, v in rows:
    if n not in loops:
        loops.append(n)
    by.setdefault(item, {})[n] = float(v)
print(f"mapfs-gw --threads N with mapfs-bench -p N, on {sys.argv[2]} CPUs (client and gateway share them)")
head = ['item'] + [f'{n} loop{"s" if n != "1" else ""}' for n in loops] + [f'x{loops[-1]}/{loops[0]}']
print('| ' + ' | '.join(head) + ' |')
print('|' + '---|' * len(head))
for item, vals in by.items():
    cells = [item] + [f'{vals.get(n, 0):,.0f} ops/s' for n in loops]
    first, last = vals.get(loops[0]), vals.get(loops[-1])
    cells.append(f'{last / first:.2f}x' if first and last else '-')
    print('| ' + ' | '.join(cells) + ' |')
EOF
