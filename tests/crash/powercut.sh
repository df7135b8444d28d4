#!/usr/bin/env bash
# powercut.sh STORE GW PCWRITER LOSSYDISK [gateway options...]
#
# A power cut of the gateway's machine while clients write small files:
# every file whose COMMIT (or FILE_SYNC WRITE) was answered must read back
# whole after the gateway starts again.  The state directory is ext4 on a
# loop device over lossydisk, a disk that keeps only what was flushed: the
# cut drops every write not flushed before it, as a machine's disk cache
# and page cache are lost.  The store (file: a directory of this host;
# rgw: radosgw) is another machine and lives on.
#
# Rounds: clients (pcwriter, 8 processes) write files of every kind it
# knows; after a random while the disk is cut and the gateway and the
# clients are killed; the file system is mounted again (ext4 replays its
# journal), the gateway starts on it, and every file answered before the
# cut is read back and compared.  Then the next round, on the same state.
# Root only (FUSE, a loop device, mount): exit 77 (skipped) otherwise.
#
# The gateway uploads a file a second after its last change (--upload-delay
# 1, before any gateway option given): a cut finds files in every state,
# journaled, flushed, uploading, uploaded.
# PC_CUT_AFTER=I: each round writes only file I (pcwriter cut-after),
# which cuts the power itself the moment its last reply came: a reply
# that did not wait for its own flush is caught every time, not only
# when no other client's flush happened to cover for it.  I "kinds":
# round r writes file r-1, so that 8 rounds cut after every kind once.
# Environment: PC_ROUNDS (3), PC_FILES per round (2000), MAPFS_S3_SCRIPTS,
# PC_KEEP=1 (keep the work directory), PC_ASYNC_MS: the export is async
# (exports(5)) with --async-window PC_ASYNC_MS: a promise counts only if
# it came a window (and 250 ms for its flush) before the cut; the rest may be
# lost, but the namespace must come back whole and every counted file
# must read back.
set -uo pipefail
[ $# -ge 4 ] || { sed -n '2,20p' "$0" >&2; exit 2; }
STORE=$1 GW=$2 PCW=$3 LOSSY=$4
shift 4
ROUNDS=${PC_ROUNDS:-3} FILES=${PC_FILES:-2000}

skip() { echo "SKIPPED: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (FUSE, a loop device, mount)"
[ -c /dev/fuse ] || skip "no /dev/fuse"
for t in losetup mkfs.ext4 mount umount fusermount3; do
	command -v $t >/dev/null || skip "no $t"
done

W=$(mktemp -d /var/tmp/mapfs-powercut.XXXXXX)
LPID= GPID= LOOP= RGWDIR=
say() { echo "powercut: $*"; }
fail() { say "FAILED: $*"; [ -f "$W/gw.log" ] && tail -n 30 "$W/gw.log"; exit 1; }

disk_down() { # the file system, the loop device, the disk
	mountpoint -q "$W/state" && { umount "$W/state" || umount -l "$W/state"; }
	[ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
	LOOP=
	if [ -n "$LPID" ]; then
		fusermount3 -u "$W/disk" 2>/dev/null || umount -l "$W/disk" 2>/dev/null
		kill "$LPID" 2>/dev/null
		wait "$LPID" 2>/dev/null
	fi
	LPID=
}
cleanup() {
	[ -n "$GPID" ] && kill -9 "$GPID" 2>/dev/null
	pkill -9 -P $$ -f pcwriter 2>/dev/null
	disk_down
	[ -n "$RGWDIR" ] && "$MAPFS_S3_SCRIPTS/rgw.sh" stop "$RGWDIR" >/dev/null 2>&1
	[ -n "${PC_KEEP:-}" ] && say "kept $W" || rm -rf "$W"
}
trap cleanup EXIT

disk_up() {
	mkdir -p "$W/disk" "$W/state"
	"$LOSSY" "$W/img" "$W/disk" >"$W/lossy.log" 2>&1 &
	LPID=$!
	for _ in $(seq 50); do [ -e "$W/disk/disk" ] && break; sleep 0.1; done
	[ -e "$W/disk/disk" ] || fail "lossydisk did not come up: $(cat "$W/lossy.log")"
	LOOP=$(losetup -f --show "$W/disk/disk") || fail "losetup"
	mount -t ext4 "$LOOP" "$W/state" || fail "mount"
}

truncate -s 4G "$W/img"
mkfs.ext4 -q -F "$W/img" || fail "mkfs.ext4"

case $STORE in
file)
	mkdir -p "$W/store"
	STORE_ARGS=(--store "file://$W/store") ;;
rgw)
	env_text=$(MAPFS_S3_WATCH_PID=$$ "$MAPFS_S3_SCRIPTS/rgw.sh" start) ||
		skip "radosgw did not start"
	set -a; eval "$env_text"; set +a
	RGWDIR=$MAPFS_S3_DIR
	STORE_ARGS=(--store "s3://$MAPFS_S3_BUCKET/powercut" --s3-endpoint
		"$MAPFS_S3_ENDPOINT" --s3-region us-east-1) ;;
*) echo "powercut: store file or rgw" >&2; exit 2 ;;
esac

ASYNC_ARGS=()
if [ -n "${PC_ASYNC_MS:-}" ]; then
	echo "/mapfs 127.0.0.1(rw,no_root_squash,insecure,async)" >"$W/exports"
	ASYNC_ARGS=(--exports "$W/exports" --async-window "$PC_ASYNC_MS")
fi

gw_up() {
	rm -f "$W/gw.out" # no "ready" of the last one seen as this one's
	"$GW" --state "$W/state/gw" "${STORE_ARGS[@]}" "${ASYNC_ARGS[@]}" --bind 127.0.0.1 \
		--nfs-port 0 --mount-port 0 --no-rpcbind --foreground \
		--log-level info --upload-delay 1 "$@" >"$W/gw.out" 2>>"$W/gw.log" &
	GPID=$!
	for _ in $(seq 300); do
		grep -q "ready" "$W/gw.out" 2>/dev/null && break
		kill -0 "$GPID" 2>/dev/null || fail "the gateway died at start"
		sleep 0.1
	done
	grep -q "ready" "$W/gw.out" || fail "the gateway did not start"
	local np mp
	np=$(grep -o 'nfs=[0-9.]*:[0-9]*' "$W/gw.out" | cut -d: -f2)
	mp=$(grep -o 'mount=[0-9.]*:[0-9]*' "$W/gw.out" | cut -d: -f2)
	URL="nfs://127.0.0.1/mapfs?nfsport=$np&mountport=$mp"
}

# Whether every thread of the gateway is stopped.  SIGSTOP stops them one
# after another (the one that takes the signal tells the rest), and on a
# busy machine one may still run for milliseconds after kill returned:
# a reply it sends after the cut, its flush dropped by the cut yet
# answered "done" to it, is a promise the disk never saw, and the check
# counted it (CI lost the last answers before a cut about one run in
# ten).  io_uring's workers never stop, and answer no client.
gw_stopped() {
	local t st
	for t in /proc/"$GPID"/task/*; do
		[[ $(cat "$t/comm" 2>/dev/null) == iou-* ]] && continue
		st=$(sed 's/.*) //' "$t/stat" 2>/dev/null | cut -d' ' -f1)
		case $st in '' | T | t | Z | X) ;; *) return 1 ;; esac
	done
}

declare -a before
disk_up
total=0
for r in $(seq "$ROUNDS"); do
	gw_up "$@"
	: >"$W/ok.$r"
	if [ -n "${PC_CUT_AFTER:-}" ]; then
		ci=$PC_CUT_AFTER
		[ "$ci" != kinds ] || ci=$(((r - 1) % 8))
		"$PCW" cut-after "$URL" "/r$r" "$ci" "$GPID" "$LPID" \
			>"$W/ok.$r" 2>"$W/pcw.$r" &
	else
		"$PCW" write "$URL" "/r$r" "$FILES" 8 >"$W/ok.$r" 2>"$W/pcw.$r" &
	fi
	WPID=$!
	# Cut while they write: after 1 to 4 s, or sooner if they are done.
	cut_at=$((10 + RANDOM % 30)) t0=$(date +%s%N)
	[ -z "${PC_CUT_AFTER:-}" ] || cut_at=300 # it cuts when it is done
	for _ in $(seq $cut_at); do
		kill -0 $WPID 2>/dev/null || break
		sleep 0.1
	done
	ms=$((($(date +%s%N) - t0) / 1000000))
	# The machine stops at once: no reply leaves after the cut.  The
	# cut waits until every thread is stopped (gw_stopped).
	kill -STOP "$GPID"
	for _ in $(seq 500); do gw_stopped && break; sleep 0.01; done
	gw_stopped || fail "round $r: the gateway did not stop for the cut"
	kill -USR1 "$LPID"            # the power is off: no write lands any more
	cut_ms=$(date +%s%3N)
	# What an async export answered within its window may be gone.
	before[$r]=0
	[ -z "${PC_ASYNC_MS:-}" ] || before[$r]=$((cut_ms - PC_ASYNC_MS - 250))
	kill -9 "$GPID"; wait "$GPID" 2>/dev/null; GPID=
	pkill -9 -P $WPID 2>/dev/null; kill -9 $WPID 2>/dev/null; wait $WPID 2>/dev/null
	n=$(grep -c '^ok ' "$W/ok.$r")
	say "round $r: cut after $ms ms, $n files answered stable"
	disk_down                     # what was not flushed is gone
	disk_up                       # ext4 replays its journal
	gw_up "$@"
	grep -h "replayed from the log\|back to the last checkpoint\|lost its cache file\|another boot" "$W/gw.log" | tail -n 3
	for k in $(seq "$r"); do
		"$PCW" check "$URL" "/r$k" "$W/ok.$k" ${before[$k]} >"$W/check.$k" 2>&1 ||
			{ cat "$W/check.$k"; fail "round $r: files of round $k lost what was promised"; }
	done
	say "round $r: every file answered stable in rounds 1-$r reads back whole ($(tail -n 1 "$W/check.$r"))"
	total=$((total + n))
	kill "$GPID"; wait "$GPID"; rc=$?; GPID=
	[ $rc = 0 ] || fail "round $r: the gateway's clean stop exited $rc"
done
[ "$total" -gt 0 ] || fail "no file was answered stable before a cut"
say "PASSED: $ROUNDS power cuts, $total files answered stable, all whole"
