#!/bin/sh
# bench/smoke: every mapfs-bench item, with tiny sizes, against a fresh
# gateway on free ports.  Checks exit codes and that --json parses; makes no
# timing assertions (CI machines are shared and noisy).
# usage: smoke.sh MAPFS_BENCH MAPFS_GW
set -eu
bench=$1
gw=$2
tmp=$(mktemp -d)
gwpid=
cleanup() {
	if [ -n "$gwpid" ]; then kill "$gwpid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/state" "$tmp/store"

"$gw" --state "$tmp/state" --store "file://$tmp/store" --bind 127.0.0.1 \
	--nfs-port 0 --mount-port 0 --no-rpcbind --foreground --threads 2 \
	>"$tmp/gw.log" 2>&1 &
gwpid=$!
i=0
until grep -q '^mapfs-gw: ready' "$tmp/gw.log"; do
	i=$((i + 1))
	if [ $i -gt 100 ] || ! kill -0 "$gwpid" 2>/dev/null; then
		echo "smoke: gateway did not start" >&2
		cat "$tmp/gw.log" >&2
		exit 1
	fi
	sleep 0.1
done
ready=$(grep '^mapfs-gw: ready' "$tmp/gw.log")
nfsport=$(echo "$ready" | sed -n 's/.* nfs=[^ ]*:\([0-9]*\) .*/\1/p')
mountport=$(echo "$ready" | sed -n 's/.* mount=[^ ]*:\([0-9]*\) .*/\1/p')
export_path=$(echo "$ready" | sed -n 's/.* export=\([^ ]*\).*/\1/p')
url="nfs://127.0.0.1$export_path?nfsport=$nfsport&mountport=$mountport&version=3"

tiny="--big-file-size 2M --small-file-size 16K --small-file-count 8 --io-file-size 1M --duration 0.1 -q 4"

# All items on two connections, as JSON.
"$bench" $tiny -p 2 --json "$url" >"$tmp/out.json"
python3 -m json.tool "$tmp/out.json" >/dev/null
n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["items"]))' "$tmp/out.json")
all=$("$bench" --help | sed -n 's/^ *\(write-big,.*\)$/\1/p' | tr ',' '\n' | wc -l)
if [ "$n" -ne "$all" ]; then
	echo "smoke: --json has $n items, expected $all" >&2
	exit 1
fi

# A subset as the table, with a block size below the file size so the small
# files take several WRITEs each.
"$bench" $tiny --block-size 4K --items write-small,read-small,stat "$url" >"$tmp/table.txt"
grep -q 'Read small file' "$tmp/table.txt"

# --reuse: read-big reads the file a --keep run left, without writing it.
"$bench" $tiny --items write-big --keep --dir reuse "$url" >/dev/null
"$bench" $tiny --items read-big --reuse --dir reuse "$url" >"$tmp/reuse.txt"
grep -q 'Read big file' "$tmp/reuse.txt"

# A bad item name is refused.
if "$bench" --items nosuch "$url" 2>/dev/null; then
	echo "smoke: an unknown item was accepted" >&2
	exit 1
fi

kill -TERM "$gwpid"
rc=0
wait "$gwpid" || rc=$?
gwpid=
if [ "$rc" -ne 0 ]; then
	echo "smoke: gateway exited $rc on SIGTERM" >&2
	cat "$tmp/gw.log" >&2
	exit 1
fi
echo "smoke: ok"
