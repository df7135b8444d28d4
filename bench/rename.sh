#!/usr/bin/env bash
# bench/rename.sh - how fast a renamed directory reaches the bucket
# (issue 49), beside `aws s3 mv --recursive` of the same tree on the same
# radosgw, interleaved rounds; then a new file written while a big rename
# drains (how long until it is in the bucket), and a kill -9 of the
# gateway in the middle of a drain (every object under its new name only,
# its bytes read back from the store).
#
# usage: bench/rename.sh [N ...]      (default: 2000 20000 files; 3 rounds)
#   env: ROUNDS=3, GW=build/mapfs-gw, BENCH=build/bench/mapfs-bench,
#        MV=build/bench/mapfs-mv, UPLOAD_DELAY=5 (the gateway's default)
# Prints one line per measurement and the medians:
#   RENAME n=2000 round=1 mapfs_s=... aws_s=...
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GW=${GW:-$ROOT/build/mapfs-gw}
BENCH=${BENCH:-$ROOT/build/bench/mapfs-bench}
MV=${MV:-$ROOT/build/bench/mapfs-mv}
ROUNDS=${ROUNDS:-3}
UPLOAD_DELAY=${UPLOAD_DELAY:-5}
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(2000 20000)
command -v aws >/dev/null || { echo "rename.sh: aws (awscli) is missing" >&2; exit 2; }
export MAPFS_RGW_STORE_GB=${MAPFS_RGW_STORE_GB:-8}
. "$ROOT/bench/rgw_lib.sh"
rgw_setup rename
AWS=(aws --endpoint-url "$MAPFS_S3_ENDPOINT" --region us-east-1)
B=s3://$MAPFS_S3_BUCKET
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
count() { "${AWS[@]}" s3 ls --recursive "$B/$1" | grep -vc '/$' || true; }
median() { tr ' ' '\n' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# shellcheck disable=SC2086
gw() { gw_start "$GW" "$WORK/gw" gw --threads 2 --upload-delay "$UPLOAD_DELAY" "$@"; }
gw

for n in "${SIZES[@]}"; do
	# The same tree twice: through the gateway (in the bucket once
	# flushed), and for aws-cli, copied in by aws-cli.
	per=$((n / 4))
	"$BENCH" -p 4 -q 16 --items write-small --small-file-count "$per" \
		--small-file-size 4K --dir "t$n.0" --keep --no-verify "$NFS_URL" >/dev/null
	"$GW" flush --state "$WORK/gw/state" >/dev/null
	"${AWS[@]}" s3 cp --recursive --quiet "$B/gw/t$n.0/" "$B/aws/t$n.0/"
	ours=() theirs=()
	for r in $(seq "$ROUNDS"); do
		t=$(now)
		"$MV" "$NFS_URL" "/t$n.$((r - 1))" "/t$n.$r" >/dev/null
		"$GW" flush --state "$WORK/gw/state" >/dev/null
		o=$(since "$t")
		t=$(now)
		"${AWS[@]}" s3 mv --recursive --quiet "$B/aws/t$n.$((r - 1))/" "$B/aws/t$n.$r/"
		a=$(since "$t")
		got=$(count "gw/t$n.$r/") left=$(count "gw/t$n.$((r - 1))/")
		echo "RENAME n=$n round=$r mapfs_s=$o aws_s=$a objects_new=$got objects_old=$left"
		[ "$got" -ge "$n" ] && [ "$left" = 0 ] || { echo "rename.sh: the bucket is wrong" >&2; exit 1; }
		ours+=("$o") theirs+=("$a")
	done
	mo=$(echo "${ours[*]}" | median) ma=$(echo "${theirs[*]}" | median)
	echo "RENAME n=$n median mapfs_s=$mo aws_s=$ma ratio=$(awk -v o="$mo" -v a="$ma" 'BEGIN { printf "%.2f", o / a }')"
done

# A new file while the biggest rename drains: how long until the bucket
# has it (the gateway's upload delay counts from its last write).
n=${SIZES[-1]}
"$MV" "$NFS_URL" "/t$n.$ROUNDS" "/t$n.x" >/dev/null
head -c 4096 /dev/urandom > "$WORK/new"
t=$(now)
nfs-cp "$WORK/new" "${NFS_URL/\/mapfs?//mapfs/new-during-drain?}" >/dev/null
until "${AWS[@]}" s3api head-object --bucket "$MAPFS_S3_BUCKET" --key gw/new-during-drain >/dev/null 2>&1; do
	sleep 0.2
done
echo "NEWFILE during a drain of $n files: in the bucket after $(since "$t") s (upload delay $UPLOAD_DELAY s); queue then: $("$GW" ctl --state "$WORK/gw/state" status | sed -n 's/^pending_store_ops: //p')"
"$GW" flush --state "$WORK/gw/state" >/dev/null

# kill -9 in the middle of a drain, a start, the rest: each object under
# its new name only, and its bytes (read from the store: evicted first).
"$MV" "$NFS_URL" "/t$n.x" "/t$n.k" >/dev/null
sleep 2
left=$("$GW" ctl --state "$WORK/gw/state" status | sed -n 's/^pending_store_ops: \([0-9]*\).*/\1/p')
kill -9 "$GW_PID"
wait "$GW_PID" 2>/dev/null || true
gw
"$GW" flush --state "$WORK/gw/state" >/dev/null
got=$(count "gw/t$n.k/") old=$(count "gw/t$n.x/")
"$GW" ctl --state "$WORK/gw/state" evict "t$n.k" >/dev/null
"$BENCH" -p 4 -q 16 --items read-small --reuse --keep --small-file-count $((n / 4)) \
	--small-file-size 4K --dir "t$n.k" "$NFS_URL" >"$WORK/verify" 2>&1 &&
	ok=yes || ok=no
echo "KILL9 n=$n killed with $left records queued: objects_new=$got objects_old=$old bytes_equal=$ok"
[ "$got" -ge "$n" ] && [ "$old" = 0 ] && [ "$ok" = yes ] || { cat "$WORK/verify" >&2; exit 1; }
