#!/usr/bin/env bash
# tests/s3/s3rver.sh - s3rver (npm, pinned in tests/s3/package.json) on
# 127.0.0.1 for the tests: a lax S3 server (no abort, ListParts or
# UploadPartCopy) that keeps its objects as files, so it can be killed and
# restarted without losing data.
#
#   s3rver.sh start [DIR]   start; prints the env to use (KEY=VALUE lines)
#                           on stdout, logs on stderr.  Without DIR a fresh
#                           /tmp/mapfs-s3rver-XXXXXX.  A DIR from an earlier
#                           halt or kill is restarted on the same port with
#                           its data.
#   s3rver.sh stop DIR      stop (only the PID it started) and delete DIR
#   s3rver.sh halt DIR      SIGTERM, DIR and data kept
#   s3rver.sh kill DIR      SIGKILL, DIR and data kept
#
# Environment for start:
#   MAPFS_S3_WATCH_PID=PID  stop and wipe once process PID is gone
#   MAPFS_S3_BUCKET         bucket to create (default mapfs-test)
#   MAPFS_S3RVER            s3rver's bin/s3rver.js (default: the one
#                           tests/s3/install-deps.sh put in tests/s3/node_modules)
# s3rver checks signatures against its one fixed key pair S3RVER/S3RVER.
# tests/s3/s3rver-fixes.js is preloaded: it fixes two races of s3rver's
# filesystem store (a PUT beside a DELETE killed the server).
# Node 20 needs --openssl-legacy-provider, or every truncated ListObjectsV2
# answers 500 (s3rver hashes continuation tokens with a legacy cipher).
set -euo pipefail
S3_ME=s3rver.sh S3_KIND=s3rver
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/common.sh"
JS=${MAPFS_S3RVER:-$HERE/node_modules/s3rver/bin/s3rver.js}

need_dir() {
	[ -n "${1:-}" ] || s3_die "usage: s3rver.sh $cmd DIR"
	D=$(readlink -f "$1")
	[ -d "$D" ] || s3_die "$D: no such dir"
	s3_ours "$D" || s3_die "$D was not made by s3rver.sh; refusing"
}

do_stop() { # SIG KEEP
	s3_stop_pids "$1" watch s3rver
	rm -f "$D/pids"
	if [ "$2" = 0 ]; then
		s3_note_stop
		s3_release_ports "$(cat "$D/port" 2>/dev/null)" "$D"
		rm -rf "$D"
	fi
}

start() {
	local fresh=1 i c pid
	command -v node >/dev/null || s3_die "missing node (apt-get install nodejs npm, then tests/s3/install-deps.sh)"
	[ -f "$JS" ] || s3_die "missing $JS: run tests/s3/install-deps.sh"
	command -v curl >/dev/null || s3_die "missing curl"
	if [ -n "${1:-}" ] && [ -f "$1/.mapfs-s3" ] && [ -f "$1/env" ]; then
		D=$(readlink -f "$1")
		[ ! -s "$D/pids" ] || s3_die "$D is running; stop it first"
		fresh=0
		PORT=$(cat "$D/port")
		s3_reserve_exact "$PORT" 1 "$D" || s3_die "cannot restart on port $PORT"
		set -a; . "$D/env"; set +a
		BUCKET=$MAPFS_S3_BUCKET
	else
		if [ -n "${1:-}" ]; then
			mkdir -p "$1"
			[ -z "$(ls -A "$1")" ] || s3_die "$1 is not empty and not ours"
			D=$(readlink -f "$1")
		else
			D=$(mktemp -d /tmp/mapfs-s3rver-XXXXXX)
		fi
		touch "$D/.mapfs-s3"
		mkdir -p "$D/data" "$D/log"
		PORT=$(s3_reserve_ports 1 "$D") || s3_die "no free port"
		echo "$PORT" >"$D/port"
		BUCKET=${MAPFS_S3_BUCKET:-mapfs-test}
		AWS_ACCESS_KEY_ID=S3RVER
		AWS_SECRET_ACCESS_KEY=S3RVER
	fi
	trap 'rc=$?; if [ $rc != 0 ]; then echo "s3rver.sh: start failed; log:" >&2
		tail -n 20 "$D/log/s3rver.out" >&2 2>/dev/null || true
		do_stop 9 $((1 - fresh)); fi' EXIT
	: >"$D/pids"
	setsid node --openssl-legacy-provider -r "$HERE/s3rver-fixes.js" "$JS" -d "$D/data" -a 127.0.0.1 \
		-p "$PORT" --no-vhost-buckets --configure-bucket "$BUCKET" \
		</dev/null >>"$D/log/s3rver.out" 2>&1 &
	pid=$!
	echo "s3rver $pid" >>"$D/pids"
	export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
	for i in $(seq 300); do
		c=$(s3_curl -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/$BUCKET?list-type=2" || true)
		[ "$c" = 200 ] && break
		kill -0 $pid 2>/dev/null || s3_die "s3rver died"
		sleep 0.1
	done
	[ "$c" = 200 ] || s3_die "list bucket $BUCKET: HTTP $c after 30 s"
	trap - EXIT
	s3_print_env
	[ -z "${MAPFS_S3_WATCH_PID:-}" ] || s3_watch "$MAPFS_S3_WATCH_PID"
	s3_log "s3rver ready on 127.0.0.1:$PORT ($([ $fresh = 1 ] && echo fresh || echo restarted)), dir $D"
}

cmd=${1:-}
case $cmd in
start) start "${2:-}" ;;
stop) need_dir "${2:-}"; do_stop 9 0 ;;
halt) need_dir "${2:-}"; do_stop 15 1 ;;
kill) need_dir "${2:-}"; do_stop 9 1 ;;
*) echo "usage: s3rver.sh start [DIR] | stop DIR | halt DIR | kill DIR" >&2; exit 2 ;;
esac
