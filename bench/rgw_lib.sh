# bench/rgw_lib.sh - sourced by the bench scripts that run gateways on one
# throw-away radosgw (uploads.sh, bigwrite.sh, visibility.sh).  Needs ROOT
# (the repository).
#
#   rgw_setup NAME        WORK (a temp dir), a radosgw started with its
#                         credentials exported (MAPFS_S3_*, AWS_*), and an
#                         EXIT trap that kills the gateways in PIDS, stops
#                         the radosgw and removes WORK
#   gw_start GW DIR PREFIX [ARGS...]
#                         a gateway binary GW with state in DIR/state on
#                         bucket prefix PREFIX, in the foreground on free
#                         loopback ports, waited for: GW_PID, NFS_PORT,
#                         MOUNT_PORT, NFS_URL (the export's libnfs URL);
#                         its output in DIR/out and DIR/err.  LOGLEVEL
#                         (default warn) sets its log level.

rgw_setup() {
	WORK=$(mktemp -d "/var/tmp/mapfs-$1.XXXXXX")
	PIDS=() RGWDIR=
	trap rgw_cleanup EXIT
	set -a # the gateway reads the credentials from the environment
	eval "$(MAPFS_S3_WATCH_PID=$$ "$ROOT/tests/s3/rgw.sh" start 2>/dev/null)"
	set +a
	RGWDIR=$MAPFS_S3_DIR
}

rgw_cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[ -n "$RGWDIR" ] && "$ROOT/tests/s3/rgw.sh" stop "$RGWDIR" >/dev/null 2>&1 || true
	rm -rf "$WORK"
}

gw_start() {
	local gw=$1 d=$2 prefix=$3
	shift 3
	mkdir -p "$d"
	"$gw" --state "$d/state" --bind 127.0.0.1 --nfs-port 0 --mount-port 0 \
		--no-rpcbind --foreground --threads 1 --log-level "${LOGLEVEL:-warn}" \
		--store "s3://$MAPFS_S3_BUCKET/$prefix" \
		--s3-endpoint "$MAPFS_S3_ENDPOINT" --s3-region us-east-1 \
		--s3-path-style "$@" >"$d/out" 2>"$d/err" &
	GW_PID=$!
	PIDS+=($GW_PID)
	for _ in $(seq 300); do grep -q ready "$d/out" && break; sleep 0.1; done
	NFS_PORT=$(sed -n 's/.*nfs=127.0.0.1:\([0-9]*\).*/\1/p' "$d/out")
	MOUNT_PORT=$(sed -n 's/.*mount=127.0.0.1:\([0-9]*\).*/\1/p' "$d/out")
	[ -n "$NFS_PORT" ] || { cat "$d/err" >&2; exit 1; }
	NFS_URL="nfs://127.0.0.1/mapfs?nfsport=$NFS_PORT&mountport=$MOUNT_PORT&version=3"
}
