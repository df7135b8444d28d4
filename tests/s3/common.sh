# tests/s3/common.sh - shared by rgw.sh and s3rver.sh (sourced, not run).
#
# Port reservations: a block of ports is ours while the directory
# $MAPFS_S3_PORTS/BASE exists (mkdir is atomic, so two instances starting at
# once never get the same block).  It holds "owner" = the instance dir; a
# reservation whose owner dir is gone is stale and is taken over.

MAPFS_S3_PORTS=${MAPFS_S3_PORTS:-/tmp/mapfs-s3-ports}

s3_die() { echo "$S3_ME: $*" >&2; exit 1; }
s3_log() { [ "${MAPFS_S3_QUIET:-0}" = 1 ] || echo "$S3_ME: $*" >&2; }

# Every TCP/UDP port something on this host has bound or connected from
# (with "listen": only those listened on).
s3_ports_in_use() {
	local f=-Htuan
	[ "${1:-}" != listen ] || f=-Htuln
	ss $f 2>/dev/null | awk '{n=split($5,a,":"); print a[n]}'
}

# s3_reserve_ports N DIR: print a base port B such that B..B+N-1 are free and
# now reserved for DIR.  Ports come from 20000-32000, below Linux's ephemeral
# range (32768+) where port-0 listeners and outgoing connections land.
s3_reserve_ports() {
	local n=$1 dir=$2 try base p used ok
	mkdir -p "$MAPFS_S3_PORTS" 2>/dev/null
	chmod 1777 "$MAPFS_S3_PORTS" 2>/dev/null || true
	for try in $(seq 200); do
		base=$((20000 + (RANDOM % ((12000 - n) / 20)) * 20))
		if [ -d "$MAPFS_S3_PORTS/$base" ]; then
			local owner
			owner=$(cat "$MAPFS_S3_PORTS/$base/owner" 2>/dev/null)
			# A reservation being made right now has no owner file yet.
			[ -n "$owner" ] && [ ! -d "$owner" ] || continue
			rm -rf "$MAPFS_S3_PORTS/$base"
		fi
		used=$(s3_ports_in_use)
		ok=1
		for p in $(seq "$base" $((base + n - 1))); do
			if grep -qx "$p" <<<"$used"; then ok=0; break; fi
		done
		[ $ok = 1 ] || continue
		mkdir "$MAPFS_S3_PORTS/$base" 2>/dev/null || continue
		echo "$dir" >"$MAPFS_S3_PORTS/$base/owner"
		echo "$base"
		return 0
	done
	return 1
}

# s3_reserve_exact BASE N DIR: take BASE again for a restart on the same
# ports; fails if someone else holds it or a port is busy.
s3_reserve_exact() {
	local base=$1 n=$2 dir=$3 p used owner
	owner=$(cat "$MAPFS_S3_PORTS/$base/owner" 2>/dev/null || true)
	if [ -n "$owner" ] && [ "$owner" != "$dir" ] && [ -d "$owner" ]; then
		echo "ports $base.. are held by $owner" >&2; return 1
	fi
	# Only listeners: the old instance's closed connections linger in
	# TIME_WAIT, and the servers bind with SO_REUSEADDR.
	used=$(s3_ports_in_use listen)
	for p in $(seq "$base" $((base + n - 1))); do
		if grep -qx "$p" <<<"$used"; then echo "port $p is busy" >&2; return 1; fi
	done
	mkdir -p "$MAPFS_S3_PORTS/$base"
	echo "$dir" >"$MAPFS_S3_PORTS/$base/owner"
}

s3_release_ports() {
	local base=$1 dir=$2
	[ -n "$base" ] || return 0
	[ "$(cat "$MAPFS_S3_PORTS/$base/owner" 2>/dev/null)" = "$dir" ] &&
		rm -rf "$MAPFS_S3_PORTS/$base"
	return 0
}

s3_randhex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }

# A SigV4-signed request to the instance (curl needs the query canonical and
# x-amz-content-sha256 set by hand; see tests/s3/README.md).
s3_curl() {
	curl -s --noproxy '*' -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
		--aws-sigv4 "aws:amz:us-east-1:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$@"
}

# The env block: stdout (for the caller) and $D/env (for later commands).
s3_print_env() {
	{
		echo "MAPFS_S3_SERVER=$S3_KIND"
		echo "MAPFS_S3_DIR=$D"
		echo "MAPFS_S3_ENDPOINT=http://127.0.0.1:$PORT"
		echo "MAPFS_S3_BUCKET=$BUCKET"
		echo "AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID"
		echo "AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY"
		echo "AWS_REGION=us-east-1"
	} | tee "$D/env"
}

# s3_watch PID: a detached watchdog that runs "$0 stop $D" once PID is gone,
# so a test process that crashes or is killed by ctest leaves nothing behind.
# It watches for as long as $D is ours (.mapfs-s3, made before anything
# else): it once looked at $D/env instead, which a fresh start writes only
# after the watch began, and a watchdog that looked first and again just
# after the write stopped the server it was to guard (a suite then found
# its store gone from the start, every change JUKEBOX).
s3_watch() {
	local owner=$1 self
	self=$(readlink -f "$0")
	setsid bash -c 'while kill -0 "$1" 2>/dev/null && [ -f "$2/.mapfs-s3" ]; do sleep 1; done
		[ -f "$2/.mapfs-s3" ] && MAPFS_S3_QUIET=1 exec "$3" stop "$2"' \
		watch "$owner" "$D" "$self" </dev/null >>"$D/log/watch.log" 2>&1 &
	echo "watch $!" >>"$D/pids"
}

# s3_stop_pids SIG NAMES...: signal our PIDs from $D/pids in the given
# order, checking /proc/PID/comm so a recycled PID is never hit; wait for
# each to go (SIGTERM: up to 15 s, then SIGKILL).
s3_stop_pids() {
	local sig=$1 n pid comm want i; shift
	[ -f "$D/pids" ] || return 0
	for n in "$@"; do
		pid=$(awk -v n="$n" '$1==n{print $2}' "$D/pids")
		[ -n "$pid" ] || continue
		[ "$pid" != "$$" ] || continue
		kill -0 "$pid" 2>/dev/null || continue
		comm=$(cat "/proc/$pid/comm" 2>/dev/null)
		case $n in
		mon.a) want=ceph-mon ;; osd.0) want=ceph-osd ;; rgw) want=radosgw ;;
		s3rver) want=node ;; watch) want=bash ;; *) want=? ;;
		esac
		[ "$comm" = "$want" ] || { s3_log "pid $pid is '$comm', not our $n; skipped"; continue; }
		kill -"$sig" "$pid" 2>/dev/null
		for i in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
		for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		s3_log "stopped $n ($pid)"
	done
}

# s3_note_stop: who removes $D, in $MAPFS_S3_PORTS/stops.log (outside $D):
# a server gone from under its test says why (tests/e2e/harness.c prints
# the lines of its dir when its own stop finds the dir gone).
s3_note_stop() {
	local by
	by=$(tr '\0' ' ' </proc/$PPID/cmdline 2>/dev/null | cut -c1-200)
	mkdir -p "$MAPFS_S3_PORTS" 2>/dev/null
	echo "$(date -u +%FT%T.%3N) $D removed by $S3_ME (pid $$, parent $PPID: $by)" \
		>>"$MAPFS_S3_PORTS/stops.log" 2>/dev/null || true
}

# Refuse to wipe a directory that is not one of ours.
s3_ours() { [ -f "$1/.mapfs-s3" ]; }
