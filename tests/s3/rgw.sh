#!/usr/bin/env bash
# tests/s3/rgw.sh - a throw-away Ceph radosgw (one mon, one OSD on memstore,
# no mgr) on 127.0.0.1 for the tests: real SigV4 checks and the whole
# multipart API.  Every process is ours and every file is under one dir.
#
#   rgw.sh start [DIR]   start; prints the env to use (KEY=VALUE lines) on
#                        stdout, logs on stderr.  Without DIR a fresh
#                        /tmp/mapfs-rgw-XXXXXX.  A DIR from an earlier
#                        "halt" is restarted on the same ports, data kept.
#   rgw.sh stop DIR      stop its processes (only the PIDs it started) and
#                        delete DIR
#   rgw.sh halt DIR      clean stop, DIR and data kept (memstore saves itself
#                        to DIR on a clean stop)
#   rgw.sh kill DIR      SIGKILL, DIR kept (memstore data is lost)
#
# Environment for start:
#   MAPFS_S3_WATCH_PID=PID  stop and wipe once process PID is gone
#   MAPFS_S3_BUCKET         bucket to create (default mapfs-test)
#   MAPFS_RGW_STORE_GB      memstore capacity (default 2)
# Each instance has its own random access key and secret.  Ports: radosgw
# on PORT, the mon on PORT+1, the OSD on PORT+2..PORT+19, a free block of 20
# picked at start (tests/s3/common.sh), so instances never collide.
set -euo pipefail
S3_ME=rgw.sh S3_KIND=rgw
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/common.sh"
NPORTS=20
DEPS="apt-get install -y --no-install-recommends ceph-mon ceph-osd radosgw ceph-common (or tests/s3/install-deps.sh)"

need_dir() {
	[ -n "${1:-}" ] || s3_die "usage: rgw.sh $cmd DIR"
	D=$(readlink -f "$1")
	[ -d "$D" ] || s3_die "$D: no such dir"
	s3_ours "$D" || s3_die "$D was not made by rgw.sh; refusing"
}

do_stop() { # SIG KEEP
	s3_stop_pids "$1" watch rgw osd.0 mon.a
	rm -f "$D/pids"
	if [ "$2" = 0 ]; then
		s3_note_stop
		s3_release_ports "$(cat "$D/port" 2>/dev/null)" "$D"
		rm -rf "$D"
	fi
}

start() {
	local fresh=1 i id osdkey osduuid fsid c
	for b in ceph-mon ceph-osd radosgw radosgw-admin ceph-authtool monmaptool ceph curl ss; do
		command -v $b >/dev/null || s3_die "missing $b: $DEPS"
	done
	if [ -n "${1:-}" ] && [ -f "$1/.mapfs-s3" ] && [ -f "$1/env" ]; then
		D=$(readlink -f "$1")
		[ ! -s "$D/pids" ] || s3_die "$D is running (pids: $(tr '\n' ' ' <"$D/pids")); stop it first"
		fresh=0
		PORT=$(cat "$D/port")
		s3_reserve_exact "$PORT" $NPORTS "$D" || s3_die "cannot restart on port $PORT"
		set -a; . "$D/env"; set +a
		BUCKET=$MAPFS_S3_BUCKET
	else
		if [ -n "${1:-}" ]; then
			mkdir -p "$1"
			[ -z "$(ls -A "$1")" ] || s3_die "$1 is not empty and not ours"
			D=$(readlink -f "$1")
		else
			D=$(mktemp -d /tmp/mapfs-rgw-XXXXXX)
		fi
		touch "$D/.mapfs-s3"
		PORT=$(s3_reserve_ports $NPORTS "$D") || s3_die "no free block of $NPORTS ports"
		echo "$PORT" >"$D/port"
		BUCKET=${MAPFS_S3_BUCKET:-mapfs-test}
		AWS_ACCESS_KEY_ID=MAPFS$(s3_randhex 8 | tr a-f A-F)
		AWS_SECRET_ACCESS_KEY=$(s3_randhex 20)
	fi
	export CEPH_CONF=$D/ceph.conf
	# From here on a failure stops what was started; a fresh dir is wiped.
	trap 'rc=$?; if [ $rc != 0 ]; then echo "rgw.sh: start failed; logs:" >&2
		tail -n 20 "$D"/log/*.log "$D"/log/*.out 2>/dev/null >&2 || true
		do_stop 9 $((1 - fresh)); fi' EXIT
	local mon=$((PORT + 1))
	if [ $fresh = 1 ]; then
		mkdir -p "$D"/{run,log,crash,mon.a,osd.0}
		fsid=$(cat /proc/sys/kernel/random/uuid)
		cat >"$D/ceph.conf" <<-EOF
		[global]
		fsid = $fsid
		mon host = [v2:127.0.0.1:$mon]
		public addr = 127.0.0.1
		cluster addr = 127.0.0.1
		ms bind msgr1 = false
		ms bind ipv6 = false
		ms bind port min = $((PORT + 2))
		ms bind port max = $((PORT + NPORTS - 1))
		auth cluster required = cephx
		auth service required = cephx
		auth client required = cephx
		keyring = $D/keyring
		run dir = $D/run
		admin socket = $D/run/\$name.asok
		pid file = $D/run/\$name.pid
		log file = $D/log/\$name.log
		crash dir = $D/crash
		mon data = $D/mon.\$id
		osd data = $D/osd.\$id
		osd objectstore = memstore
		memstore device bytes = $((${MAPFS_RGW_STORE_GB:-2} << 30))
		# a clean stop saves memstore to osd.0/ (for halt + start)
		osd fast shutdown = false
		osd pool default size = 1
		osd pool default min size = 1
		mon allow pool size one = true
		mon allow pool delete = true
		mon warn on pool no redundancy = false
		mon warn on insecure global id reclaim allowed = false
		mon max pg per osd = 1000
		osd pool default pg num = 8
		osd pool default pgp num = 8
		osd pool default pg autoscale mode = off
		osd crush chooseleaf type = 0
		osd crush initial weight = 1
		osd memory target = 536870912
		mon memory target = 134217728
		osd op num shards = 1
		osd op num threads per shard = 2
		osd heartbeat grace = 60
		mon osd report timeout = 3600
		mon data avail warn = 1
		mon data avail crit = 0
		# each pool radosgw creates is a paxos round; the default batches for 1 s
		paxos propose interval = 0.05
		paxos min wait = 0.01
		[osd]
		keyring = $D/osd.\$id/keyring
		[client.rgw]
		# tcp_nodelay: without it beast's Nagle holds each answer's tail
		# until a kept-alive client's delayed ACK (~40 ms): a
		# ListObjectsV2 page took 46 ms instead of 13 (bench/RESULTS.md)
		rgw frontends = beast endpoint=127.0.0.1:$PORT tcp_nodelay=1
		rgw thread pool size = 32
		rgw enable usage log = false
		rgw dns name = localhost
		rgw gc obj min wait = 60
		rgw gc processor period = 60
		EOF
		ceph-authtool "$D/keyring" --create-keyring --gen-key -n mon. --cap mon 'allow *' >/dev/null
		ceph-authtool "$D/keyring" --gen-key -n client.admin --cap mon 'allow *' \
			--cap osd 'allow *' --cap mgr 'allow *' --cap mds 'allow *' >/dev/null
		ceph-authtool "$D/keyring" --gen-key -n client.rgw --cap mon 'allow rw' \
			--cap osd 'allow rwx' --cap mgr 'allow rw' >/dev/null
		osdkey=$(ceph-authtool --gen-print-key)
		monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon]" "$D/monmap" >/dev/null
		ceph-mon --mkfs -i a --monmap "$D/monmap" --keyring "$D/keyring" >"$D/log/mkfs-mon.out" 2>&1
	fi
	: >"$D/pids"
	setsid ceph-mon -f -i a </dev/null >"$D/log/mon.a.out" 2>&1 &
	echo "mon.a $!" >>"$D/pids"
	# A client that finds no mon retries only after 3 s: wait until it listens.
	for i in $(seq 500); do (exec 3<>"/dev/tcp/127.0.0.1/$mon") 2>/dev/null && break; sleep 0.02; done
	if [ $fresh = 1 ]; then
		osduuid=$(cat /proc/sys/kernel/random/uuid)
		echo "{\"cephx_secret\": \"$osdkey\"}" >"$D/osd.0/new.json"
		id=$(ceph --connect-timeout 30 osd new "$osduuid" -i "$D/osd.0/new.json")
		rm -f "$D/osd.0/new.json"
		[ "$id" = 0 ] || s3_die "osd new returned '$id'"
		ceph-osd --mkfs -i 0 --key "$osdkey" --osd-uuid "$osduuid" >"$D/log/mkfs-osd.out" 2>&1
		printf '[osd.0]\n\tkey = %s\n' "$osdkey" >"$D/osd.0/keyring"
	fi
	setsid ceph-osd -f -i 0 </dev/null >"$D/log/osd.0.out" 2>&1 &
	echo "osd.0 $!" >>"$D/pids"
	if [ $fresh = 1 ]; then
		# Creates the zone and the rgw pools; waits for the OSD to serve them.
		timeout 120 radosgw-admin -n client.admin user create --uid=mapfs-test \
			--display-name=mapfs-test --access-key="$AWS_ACCESS_KEY_ID" \
			--secret-key="$AWS_SECRET_ACCESS_KEY" >"$D/log/user-create.out" 2>&1 ||
			s3_die "radosgw-admin user create failed"
	fi
	setsid radosgw -f -n client.rgw </dev/null >"$D/log/rgw.out" 2>&1 &
	local rgwpid=$!
	echo "rgw $rgwpid" >>"$D/pids"
	for i in $(seq 600); do
		curl -s --noproxy '*' -o /dev/null "http://127.0.0.1:$PORT/" && break
		kill -0 $rgwpid 2>/dev/null || s3_die "radosgw died"
		sleep 0.1
	done
	export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
	if [ $fresh = 1 ]; then
		c=$(s3_curl -o "$D/log/mkbucket.out" -w '%{http_code}' -X PUT "http://127.0.0.1:$PORT/$BUCKET")
		[ "$c" = 200 ] || s3_die "create bucket $BUCKET: HTTP $c $(cat "$D/log/mkbucket.out")"
	fi
	c=$(s3_curl -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/$BUCKET?list-type=2")
	[ "$c" = 200 ] || s3_die "list bucket $BUCKET: HTTP $c"
	trap - EXIT
	s3_print_env
	[ -z "${MAPFS_S3_WATCH_PID:-}" ] || s3_watch "$MAPFS_S3_WATCH_PID"
	s3_log "radosgw ready on 127.0.0.1:$PORT ($([ $fresh = 1 ] && echo fresh || echo restarted)), dir $D"
}

cmd=${1:-}
case $cmd in
start) start "${2:-}" ;;
stop) need_dir "${2:-}"; do_stop 9 0 ;;
halt) need_dir "${2:-}"; do_stop 15 1 ;;
kill) need_dir "${2:-}"; do_stop 9 1 ;;
*) echo "usage: rgw.sh start [DIR] | stop DIR | halt DIR | kill DIR" >&2; exit 2 ;;
esac
