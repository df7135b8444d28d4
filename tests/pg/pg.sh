#!/usr/bin/env bash
# tests/pg/pg.sh - a throwaway PostgreSQL 15 for the tests, on 127.0.0.1.
#
#   pg.sh start [DIR]   initdb (once) and start; prints the env to use:
#                       MAPFS_PG_DIR, MAPFS_PG_PORT, MAPFS_PG_URL (a TCP URI
#                       to the database "mapfs" as superuser "mapfs")
#   pg.sh stop DIR      stop and remove DIR
#   pg.sh halt DIR      stop, keep DIR (start DIR brings it back, same port)
#   pg.sh kill DIR      stop at once (-m immediate: a crash, for outages)
#   pg.sh createdb DIR NAME   a fresh database NAME; prints its URI
#   pg.sh standby DIR SDIR   a synchronous standby of DIR's server in SDIR
#                       (pg_basebackup, streaming; DIR's commits wait for
#                       it); an SDIR that was a primary (stopped) rejoins
#                       on its own port, its data replaced; prints MAPFS_PG_STANDBY_DIR, _PORT and
#                       MAPFS_PG_PAIR_URL (both hosts, read-write target)
#   pg.sh promote SDIR  make the standby the primary
#
# MAPFS_PG_OPTS adds server options to a start (bench/cluster_profile.sh
# --statements: "-c shared_preload_libraries=pg_stat_statements").
#
# Besides the superuser "mapfs" (trust), the role "mapfs_pw" must log in
# with the password "right" (scram-sha-256): the wrong-password tests.
#
# postgres refuses to run as root: the server runs as the user "postgres"
# (Debian's package makes it) or else "nobody", in DIR (mode 0700 for
# that user), with trust authentication on loopback only.  With
# MAPFS_S3_WATCH_PID (or MAPFS_PG_WATCH_PID) set, a watcher stops and
# removes the instance when that process exits, so a crashed test never
# leaks a server.  Durable settings (fsync on): the tests kill things.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
S3_ME=pg.sh
# Port reservations are shared with the S3 servers' (tests/s3/common.sh).
source "$HERE/../s3/common.sh"
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}

die() { echo "pg.sh: $*" >&2; exit 1; }

pg_user() {
	if getent passwd postgres >/dev/null; then echo postgres; else echo nobody; fi
}

as_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u "$(pg_user)" -- "$@"; else "$@"; fi
}

env_of() {
	local dir=$1 port
	port=$(cat "$dir/port")
	echo "MAPFS_PG_DIR=$dir"
	echo "MAPFS_PG_PORT=$port"
	echo "MAPFS_PG_URL=postgresql://mapfs@127.0.0.1:$port/mapfs"
}

running() {
	[ -f "$1/data/postmaster.pid" ] &&
		as_pg "$PGBIN/pg_ctl" -D "$1/data" status >/dev/null 2>&1
}

watch() {
	local dir=$1 pid=${MAPFS_PG_WATCH_PID:-${MAPFS_S3_WATCH_PID:-}}
	[ -n "$pid" ] || return 0
	# Detached from our stdout, so that the caller's $(...) returns.
	(
		while kill -0 "$pid" 2>/dev/null && [ -d "$dir" ]; do sleep 1; done
		[ -d "$dir" ] && [ ! -f "$dir/keep" ] && "$0" stop "$dir" >/dev/null 2>&1
	) </dev/null >/dev/null 2>&1 &
}

start() {
	local dir=${1:-} base fresh=0
	[ -x "$PGBIN/initdb" ] || die "no $PGBIN/initdb: apt-get install postgresql"
	if [ -z "$dir" ]; then
		dir=$(mktemp -d /tmp/mapfs-pg-XXXXXX)
	fi
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	[ $((${#dir} + 20)) -le 107 ] || die "$dir is too long for a unix socket"
	[ "$(id -u)" != 0 ] || chown "$(pg_user)" "$dir"
	chmod 0700 "$dir"
	if running "$dir"; then env_of "$dir"; return 0; fi
	if [ -f "$dir/port" ]; then
		base=$(cat "$dir/port")
		s3_reserve_exact "$base" 1 "$dir" || die "port $base is taken"
	else
		base=$(s3_reserve_ports 1 "$dir") || die "no free port"
		echo "$base" >"$dir/port"
	fi
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		as_pg "$PGBIN/initdb" -N -D "$dir/data" -U mapfs -A trust -E UTF8 \
			--locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
			die "initdb failed: $(tail -3 "$dir/initdb.log")"
		# One role that needs a password (wrong-password tests):
		# its line comes before the trust lines.
		sed -i '1i host all mapfs_pw 127.0.0.1/32 scram-sha-256' \
			"$dir/data/pg_hba.conf"
		fresh=1
	fi
	as_pg "$PGBIN/pg_ctl" -D "$dir/data" -w -t 60 -l "$dir/log" -o \
		"-p $base -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=64MB ${MAPFS_PG_OPTS:-}" \
		start >/dev/null 2>&1 || die "postgres did not start: $(tail -3 "$dir/log" | tr '\n' ' ')"
	if [ $fresh = 1 ]; then
		as_pg "$PGBIN/psql" -X -q -h "$dir" -p "$base" -U mapfs -d postgres \
			-c "CREATE DATABASE mapfs" \
			-c "CREATE ROLE mapfs_pw LOGIN PASSWORD 'right'" >/dev/null ||
			die "createdb failed"
	fi
	watch "$dir"
	env_of "$dir"
}

stop_server() {
	local dir=$1 mode=$2 pid
	as_pg "$PGBIN/pg_ctl" -D "$dir/data" -m "$mode" -w -t 30 stop >/dev/null 2>&1 && return 0
	# Never by name: the pid in its own pid file.
	pid=$(head -1 "$dir/data/postmaster.pid" 2>/dev/null || true)
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
}

cmd=${1:-}
case $cmd in
start) start "${2:-}" ;;
stop)
	dir=${2:?pg.sh stop DIR}
	[ -d "$dir" ] || exit 0
	stop_server "$dir" fast
	s3_release_ports "$(cat "$dir/port" 2>/dev/null || true)" "$dir"
	rm -rf "$dir"
	;;
halt)
	dir=${2:?pg.sh halt DIR}
	touch "$dir/keep"
	stop_server "$dir" fast
	rm -f "$dir/keep"
	;;
kill)
	dir=${2:?pg.sh kill DIR}
	touch "$dir/keep"
	stop_server "$dir" immediate
	rm -f "$dir/keep"
	;;
standby)
	dir=${2:?pg.sh standby DIR SDIR} sdir=${3:?pg.sh standby DIR SDIR}
	port=$(cat "$dir/port")
	mkdir -p "$sdir"
	sdir=$(cd "$sdir" && pwd)
	[ "$(id -u)" != 0 ] || chown "$(pg_user)" "$sdir"
	chmod 0700 "$sdir"
	if [ -f "$sdir/port" ]; then
		# An old primary rejoins as the standby, on its own port (the
		# pair's URL stays right); what it had is thrown away.
		running "$sdir" && die "$sdir is running"
		sport=$(cat "$sdir/port")
		s3_reserve_exact "$sport" 1 "$sdir" || die "port $sport is taken"
		rm -rf "$sdir/data"
	else
		sport=$(s3_reserve_ports 1 "$sdir") || die "no free port"
		echo "$sport" >"$sdir/port"
	fi
	as_pg "$PGBIN/pg_basebackup" -d "host=$dir port=$port user=mapfs application_name=s1" \
		-D "$sdir/data" -R -X stream -c fast >"$sdir/basebackup.log" 2>&1 ||
		die "pg_basebackup failed: $(tail -3 "$sdir/basebackup.log")"
	# A primary that was itself a pair's has synchronous_standby_names
	# in its copied settings: this one, once promoted, would wait for
	# a standby it lacks.
	sed -i '/^synchronous_standby_names/d' "$sdir/data/postgresql.auto.conf"
	as_pg "$PGBIN/pg_ctl" -D "$sdir/data" -w -t 60 -l "$sdir/log" -o \
		"-p $sport -k $sdir -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=64MB" \
		start >/dev/null 2>&1 || die "the standby did not start: $(tail -3 "$sdir/log" | tr '\n' ' ')"
	# Only now: a standby copied with it would wait for itself once promoted.
	as_pg "$PGBIN/psql" -X -q -h "$dir" -p "$port" -U mapfs -d postgres \
		-c "ALTER SYSTEM SET synchronous_standby_names = 's1'" \
		-c "SELECT pg_reload_conf()" >/dev/null || die "synchronous_standby_names"
	for _ in $(seq 100); do
		st=$(as_pg "$PGBIN/psql" -X -qAt -h "$dir" -p "$port" -U mapfs -d postgres \
			-c "SELECT sync_state FROM pg_stat_replication WHERE application_name = 's1'")
		[ "$st" = sync ] && break
		sleep 0.1
	done
	[ "$st" = sync ] || die "the standby is not synchronous ($st)"
	watch "$sdir"
	echo "MAPFS_PG_STANDBY_DIR=$sdir"
	echo "MAPFS_PG_STANDBY_PORT=$sport"
	echo "MAPFS_PG_PAIR_URL=postgresql://mapfs@127.0.0.1:$port,127.0.0.1:$sport/mapfs?target_session_attrs=read-write"
	;;
promote)
	sdir=${2:?pg.sh promote SDIR}
	as_pg "$PGBIN/pg_ctl" -D "$sdir/data" -w -t 60 promote >/dev/null 2>&1 ||
		die "promote failed: $(tail -3 "$sdir/log" | tr '\n' ' ')"
	;;
createdb)
	dir=${2:?pg.sh createdb DIR NAME} name=${3:?pg.sh createdb DIR NAME}
	port=$(cat "$dir/port")
	as_pg "$PGBIN/psql" -X -q -h "$dir" -p "$port" -U mapfs -d postgres \
		-c "CREATE DATABASE \"$name\"" >/dev/null || die "createdb $name failed"
	echo "postgresql://mapfs@127.0.0.1:$port/$name"
	;;
*)
	echo "usage: pg.sh start [DIR] | stop DIR | halt DIR | kill DIR | createdb DIR NAME | standby DIR SDIR | promote SDIR" >&2
	exit 2
	;;
esac
