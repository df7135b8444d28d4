#!/usr/bin/env bash
# bench/compare.sh - mapfs-gw against nfs-ganesha on the same disk, in one
# run, with the limits of this machine measured in the same run (issue 5).
#
#   bench/compare.sh [--quick] [--rounds N] [options]     (as root)
#
# What it does, in order:
#   1. a network namespace of its own with loopback up, its own rpcbind (and
#      a private /run, so the host's rpcbind files are never touched), and in
#      it nfs-ganesha (FSAL_VFS, NFSv3 only) and mapfs-gw (file store), both
#      keeping their data under one work dir on the same disk;
#   2. the limits: iperf3 loopback TCP (one stream) in that namespace, fio on
#      the work dir (O_DIRECT: 1 MiB sequential read and write, 4 KiB random
#      read at qd32);
#   3. ROUNDS rounds of the same mapfs-bench items against both servers,
#      interleaved item group by item group, the server that goes first
#      alternating from round to round;
#   4. for S3 (unless --no-s3): s3rver (and radosgw unless --no-rgw) on
#      127.0.0.1 via tests/s3/*.sh; per server the raw 8-way parallel GET and
#      PUT throughput (curl --aws-sigv4), then mapfs-gw on that store (big
#      file upload until the object is in the bucket, cold sequential read
#      through a fresh gateway, small-file creates, the cold read again
#      with --cache-direct), and on s3rver the same
#      file-level workloads through s3fs-fuse (dd, xargs -P);
#   5. the medians per item, the ratios, and the issue's targets, met or not.
# With --only-s3, steps 1-3 are skipped: no namespace, no ganesha, no limits.
# Ctrl-C or any failure stops everything it started (only its own PIDs, its
# own namespace, its own mounts) and removes the work dir (--keep keeps it).
# Installs what is missing (apt: nfs-ganesha nfs-ganesha-vfs rpcbind iperf3
# fio s3fs; s3rver via tests/s3/install-deps.sh) unless --no-install.
# Makes no assertions: it prints numbers, and "no" where a target is missed.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)

usage() {
	cat <<-EOF
	usage: bench/compare.sh [options]        (needs root: ip netns, mount)
	  --rounds N          rounds of the mapfs/ganesha and S3 items (3)
	  --quick             a CI-sized run: 1 round, tiny sizes, no radosgw
	                      (options after it override its values)
	  --duration S        seconds per rate item of mapfs-bench (3)
	  --big SIZE          big file of write-big/read-big (1G)
	  --io-file SIZE      file of the 4k and 1m items (256M)
	  --small-count N     small files (128 KiB) per round (500)
	  --s3-size SIZE      bytes moved per S3 measurement (256M)
	  --s3-small-count N  small files per S3 round (200)
	  --bench-threads N   mapfs-bench -p: connections (1)
	  --gw-threads N      mapfs-gw --threads (2)
	  --dir DIR           parent of the work dir, on the disk to test (/var/tmp)
	  --gw PATH           mapfs-gw binary (build/mapfs-gw)
	  --async             mapfs-gw's export async (exports(5), as knfsd's:
	                      changes and stable writes on disk within
	                      --async-window, 50 ms, after the reply)
	  --bench PATH        mapfs-bench binary (build/bench/mapfs-bench)
	  --no-s3             skip the S3 part;  --no-rgw: skip radosgw only
	  --only-s3           only the S3 part (no ganesha, no namespace, no limits)
	  --rgw               radosgw too (after --quick, which leaves it out)
	  --no-limits         skip iperf3 and fio
	  --no-install        never run apt-get / npm
	  --json FILE         also write every measurement and the medians as JSON
	  --keep              keep the work dir (logs, raw results)
	EOF
}

ROUNDS=3 DURATION=3 BIG=1G IOFILE=256M SMALLN=500 S3SIZE=256M S3SMALLN=200
BTHREADS=1 GWTHREADS=2 PARENT=/var/tmp IPERF_S=5 FIO_S=5 FIO_SIZE=1G
GW=$ROOT/build/mapfs-gw BENCH=$ROOT/build/bench/mapfs-bench
DO_NFS=1 DO_S3=1 DO_RGW=1 DO_LIMITS=1 DO_INSTALL=1 JSON_OUT='' KEEP=0 ASYNC=0
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$2; shift ;;
	--async) ASYNC=1 ;;
	--quick) # sizes for seconds, not minutes; options after it still win
		ROUNDS=1 DURATION=0.5 BIG=64M IOFILE=32M SMALLN=40 S3SIZE=32M S3SMALLN=16
		IPERF_S=1 FIO_S=1 FIO_SIZE=64M DO_RGW=0 ;;
	--duration) DURATION=$2; shift ;;
	--big) BIG=$2; shift ;;
	--io-file) IOFILE=$2; shift ;;
	--small-count) SMALLN=$2; shift ;;
	--s3-size) S3SIZE=$2; shift ;;
	--s3-small-count) S3SMALLN=$2; shift ;;
	--bench-threads) BTHREADS=$2; shift ;;
	--gw-threads) GWTHREADS=$2; shift ;;
	--dir) PARENT=$2; shift ;;
	--gw) GW=$2; shift ;;
	--bench) BENCH=$2; shift ;;
	--no-s3) DO_S3=0 ;;
	--only-s3) DO_NFS=0 DO_S3=1 DO_LIMITS=0 ;;
	--no-rgw) DO_RGW=0 ;;
	--rgw) DO_RGW=1 ;;
	--no-limits) DO_LIMITS=0 ;;
	--no-install) DO_INSTALL=0 ;;
	--json) JSON_OUT=$2; shift ;;
	--keep) KEEP=1 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "compare.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
case $ROUNDS in '' | *[!0-9]* | 0) echo "compare.sh: bad --rounds" >&2; exit 2 ;; esac

log() { echo "compare.sh: $*" >&2; }
die() { log "$*"; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (ip netns, mount, apt)"
[ -x "$GW" ] || die "no $GW: cmake -S . -B build && cmake --build build"
[ -x "$BENCH" ] || die "no $BENCH: cmake --build build --target mapfs-bench"
GW=$(readlink -f "$GW") BENCH=$(readlink -f "$BENCH")

bytes_of() { # 64M -> 67108864
	local n=${1%[KkMmGg]*} u=${1##*[0-9]}
	case $u in '') echo "$n" ;; [Kk]) echo $((n << 10)) ;; [Mm]) echo $((n << 20)) ;;
	[Gg]) echo $((n << 30)) ;; *) die "bad size $1" ;; esac
}
S3BYTES=$(bytes_of "$S3SIZE")
[ $((S3BYTES % (8 << 20))) = 0 ] || die "--s3-size must be a multiple of 8M"

# ---------------------------------------------------------------- install
install_deps() {
	local want=() p
	local base=(python3 curl iproute2)
	[ $DO_NFS = 0 ] || base+=(nfs-ganesha nfs-ganesha-vfs rpcbind iperf3 fio)
	for p in "${base[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || want+=("$p")
	done
	if [ $DO_S3 = 1 ]; then
		dpkg-query -W -f='${Status}' s3fs 2>/dev/null | grep -q "ok installed" || want+=(s3fs)
	fi
	if [ ${#want[@]} -gt 0 ]; then
		[ $DO_INSTALL = 1 ] || die "missing packages: ${want[*]} (and --no-install)"
		log "installing ${want[*]}"
		apt-get update -qq
		# No daemon is started: there is no systemd here, and where there
		# is, policy-rc.d style starts would only add load to the run.
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			"${want[@]}" >/dev/null
	fi
	if [ $DO_S3 = 1 ]; then
		if [ $DO_INSTALL = 1 ]; then
			"$ROOT/tests/s3/install-deps.sh"
		else
			[ -f "$ROOT/tests/s3/node_modules/s3rver/bin/s3rver.js" ] ||
				die "no s3rver: run tests/s3/install-deps.sh"
		fi
	fi
}
install_deps

# ---------------------------------------------------------------- cleanup
mkdir -p "$PARENT"
WORK=$(mktemp -d "$(readlink -f "$PARENT")/mapfs-compare.XXXXXX")
NS=mapfs-cmp-$$
RES=$WORK/results.tsv
: >"$RES"
NS_MADE=0 S3GW_PID='' S3FS_PID='' S3FS_MNT='' S3_DIRS=()

stop_pid() { # PID COMM: TERM, up to 15 s, then KILL; only if it is still COMM
	local pid=$1 comm=$2 i
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
	[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 150); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null || true
}

. "$HERE/s3fs_lib.sh" # s3fs_mount, s3fs_umount

cleanup() {
	local rc=$? p d
	trap - EXIT INT TERM
	s3fs_umount
	if [ -n "$S3GW_PID" ]; then stop_pid "$S3GW_PID" mapfs-gw; wait "$S3GW_PID" 2>/dev/null || true; fi
	for d in "${S3_DIRS[@]}"; do
		[ -f "$d/env" ] || continue
		case $d in *rgw*) "$ROOT/tests/s3/rgw.sh" stop "$d" 2>/dev/null || true ;;
		*) "$ROOT/tests/s3/s3rver.sh" stop "$d" 2>/dev/null || true ;; esac
	done
	if [ $NS_MADE = 1 ]; then
		# Every process in the namespace is ours: it was made for this run.
		for p in $(ip netns pids "$NS" 2>/dev/null); do kill -TERM "$p" 2>/dev/null || true; done
		for _ in $(seq 100); do [ -z "$(ip netns pids "$NS" 2>/dev/null)" ] && break; sleep 0.1; done
		for p in $(ip netns pids "$NS" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
		sleep 0.2
		ip netns del "$NS" 2>/dev/null || true
	fi
	if [ $KEEP = 1 ] || [ $rc != 0 ]; then
		log "work dir kept: $WORK"
	else
		rm -rf "$WORK"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT
trap 'log terminated; exit 143' TERM

# Records one measurement: SECTION SERIES ITEM ROUND VALUE UNIT.
rec() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RES"; }
now() { date +%s.%N; }
rate() { awk -v b="$1" -v t0="$2" -v t1="$3" 'BEGIN { printf "%.3f", b / 1048576 / (t1 - t0) }'; }

# ---------------------------------------------------------------- machine
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
{
	echo "machine: $(nproc) CPUs ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n1)),"\
		"$(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM,"\
		"kernel $(uname -r)"
	echo "disk: $(df -h --output=source,fstype,size "$WORK" | tail -n1 | tr -s ' ') (work dir $WORK)"
	echo "ganesha: $([ $DO_NFS = 0 ] && echo 'not run' ||
		ganesha.nfsd -v 2>&1 | sed -n 's/.*Release = //p' | head -n1)," \
		"mapfs-gw: $("$GW" --version 2>&1 | head -n1) ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'))"
	echo "load average at start: $LOAD0"
} | tee "$WORK/machine.txt" >&2

# ---------------------------------------------------------------- the namespace
if [ $DO_NFS = 1 ]; then
	ip netns add "$NS"
	NS_MADE=1
	ip netns exec "$NS" ip link set lo up
fi
nsx() { ip netns exec "$NS" "$@"; }

wait_listen() { # PORT... inside the namespace, up to 30 s
	local i p ok
	for i in $(seq 300); do
		ok=1
		for p in "$@"; do nsx ss -Htln "sport = :$p" | grep -q . || ok=0; done
		[ $ok = 1 ] && return 0
		sleep 0.1
	done
	return 1
}

start_ganesha() {
	local G=$WORK/ganesha plugins
	mkdir -p "$G/export" "$G/recov"
	chmod 1777 "$G/export"
	plugins=$(dirname "$(dpkg -L nfs-ganesha-vfs 2>/dev/null | grep 'libfsalvfs.so$' | head -n1)")
	[ -d "$plugins" ] || plugins=/usr/lib/x86_64-linux-gnu/ganesha
	# No Bind_Addr: ganesha resolves it with AI_ADDRCONFIG, which finds no
	# address in a namespace that has only loopback.  The namespace is ours,
	# so listening on all its addresses is listening on 127.0.0.1.
	cat >"$G/ganesha.conf" <<-EOF
	NFS_CORE_PARAM {
	    NFS_Port = 2049;
	    MNT_Port = 20048;
	    Enable_NLM = false;
	    Enable_RQUOTA = false;
	    Enable_UDP = false;
	    Protocols = 3;
	    Plugins_Dir = $plugins;
	}
	NFSV4 { RecoveryBackend = fs; RecoveryRoot = $G/recov; Graceless = true; }
	EXPORT_DEFAULTS { Squash = No_Root_Squash; }
	EXPORT {
	    Export_Id = 1;
	    Path = $G/export;
	    Pseudo = $G/export;
	    Access_Type = RW;
	    Squash = No_Root_Squash;
	    Protocols = 3;
	    Transports = TCP;
	    SecType = sys;
	    FSAL { Name = VFS; }
	}
	LOG { Default_Log_Level = EVENT; }
	EOF
	# rpcbind and ganesha share a private /run: rpcbind's socket and lock
	# live there, and ganesha registers with this rpcbind, not the host's.
	nsx unshare -m --propagation private sh -c '
		mount -t tmpfs -o mode=755 tmpfs /run && mkdir -p /run/rpcbind &&
		rpcbind -w && exec ganesha.nfsd -f "$1/ganesha.conf" -p "$1/ganesha.pid" \
			-L "$1/ganesha.log" -N NIV_EVENT' sh "$G"
	wait_listen 2049 20048 || { tail -n 20 "$G/ganesha.log" >&2; die "ganesha did not come up"; }
	nsx rpcinfo -p 127.0.0.1 >"$G/rpcinfo.txt" 2>&1 || true
	GANESHA_URL="nfs://127.0.0.1$G/export?nfsport=2049&mountport=20048&version=3"
}

# start_mapfs LOGFILE [ARGS...]: mapfs-gw in the foreground (background job);
# sets GWPID and GWURL.  $LAUNCH runs it (empty: here; or "ip netns exec NS",
# which execs, so $! is the gateway itself).  --log-level warn: an info line
# per request would be part of what is measured.
start_mapfs() {
	local logf=$1 i ready nfsport mountport exp; shift
	$LAUNCH "$GW" --bind 127.0.0.1 --nfs-port 0 --mount-port 0 --no-rpcbind --foreground \
		--threads "$GWTHREADS" --log-level warn "$@" >"$logf" 2>&1 &
	GWPID=$!
	for i in $(seq 300); do
		grep -q '^mapfs-gw: ready' "$logf" && break
		kill -0 "$GWPID" 2>/dev/null || { cat "$logf" >&2; die "mapfs-gw died"; }
		sleep 0.1
	done
	ready=$(grep '^mapfs-gw: ready' "$logf") || die "mapfs-gw did not start"
	nfsport=$(echo "$ready" | sed -n 's/.* nfs=[^ ]*:\([0-9]*\) .*/\1/p')
	mountport=$(echo "$ready" | sed -n 's/.* mount=[^ ]*:\([0-9]*\) .*/\1/p')
	exp=$(echo "$ready" | sed -n 's/.* export=\([^ ]*\).*/\1/p')
	GWURL="nfs://127.0.0.1$exp?nfsport=$nfsport&mountport=$mountport&version=3"
}

stop_mapfs() { # SIGTERM: finishes in-flight work, flushes the journal
	stop_pid "$GWPID" mapfs-gw
	wait "$GWPID" 2>/dev/null || true
	GWPID=
}

if [ $DO_NFS = 1 ]; then
	log "starting nfs-ganesha and mapfs-gw in network namespace $NS"
	start_ganesha
	mkdir -p "$WORK/mapfs/state" "$WORK/mapfs/store"
	exports=()
	if [ $ASYNC = 1 ]; then
		echo "/mapfs 127.0.0.1(rw,no_root_squash,insecure,async)" >"$WORK/mapfs/exports"
		exports=(--exports "$WORK/mapfs/exports")
	fi
	LAUNCH="ip netns exec $NS" start_mapfs "$WORK/mapfs/gw.log" --state "$WORK/mapfs/state" \
		--store "file://$WORK/mapfs/store" "${exports[@]}"
	MAPFS_URL=$GWURL
fi

# ---------------------------------------------------------------- limits
limits() {
	local j port=5201 f=$WORK/fio
	log "limits: iperf3 loopback (${IPERF_S}s, one stream)"
	local ipid
	nsx iperf3 -s -1 -p $port >"$WORK/iperf3-server.log" 2>&1 &
	ipid=$!
	wait_listen $port || die "iperf3 -s did not listen"
	j=$(nsx iperf3 -c 127.0.0.1 -p $port -t "$IPERF_S" -J)
	rec limit iperf3 loopback-tcp 1 "$(echo "$j" | python3 -c \
		'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/8/1048576)')" MiB/s
	wait "$ipid" || true
	log "limits: fio on $WORK (O_DIRECT, ${FIO_S}s per job, $FIO_SIZE file)"
	mkdir -p "$f"
	fio_job() { # NAME RW BS DEPTH
		fio --name="$1" --filename="$f/file" --size="$FIO_SIZE" --rw="$2" --bs="$3" \
			--iodepth="$4" --ioengine=libaio --direct=1 --runtime="$FIO_S" --time_based \
			--output-format=json >"$f/$1.json" 2>"$f/$1.err" || { cat "$f/$1.err" >&2; return 1; }
	}
	fio_job seq-write-1m write 1M 16 && fio_job seq-read-1m read 1M 16 &&
		fio_job rand-read-4k randread 4k 32 || { log "fio failed"; return 0; }
	python3 - "$f" "$RES" <<-'EOF'
	import json, sys
	d, res = sys.argv[1], open(sys.argv[2], "a")
	for name, rw, key in (("seq-write-1m", "write", "bw"), ("seq-read-1m", "read", "bw"),
			      ("rand-read-4k", "read", "iops")):
	    j = json.load(open(f"{d}/{name}.json"))["jobs"][0][rw]
	    v, unit = (j["bw"] / 1024, "MiB/s") if key == "bw" else (j["iops"], "ops/s")
	    res.write(f"limit\tfio\t{name}\t1\t{v:.3f}\t{unit}\n")
	EOF
	rm -f "$f/file"
}
[ $DO_LIMITS = 0 ] || limits

# ---------------------------------------------------------------- mapfs vs ganesha
# Item groups: one mapfs-bench run each, at the depths of the issue's table.
# (COMPARE_GROUPS="small meta" runs only those.)
read -r -a GROUPS_ <<<"${COMPARE_GROUPS:-io4k meta small big}"
group_args() {
	case $1 in
	io4k) echo "-q 32 --items rand-read-4k,rand-write-4k --io-file-size $IOFILE" ;;
	meta) echo "-q 64 --items getattr,lookup,access,null" ;;
	small) echo "-q 16 --items write-small,read-small,stat,remove --small-file-count $SMALLN" ;;
	# The server's CPU per small file written (wsmall, files kept) and
	# per REMOVE one at a time (wrm: of wsmall's files), each measured
	# until SETTLE_S after the run (the gateway's uploads and store
	# deletes of those files included; the report's "cpu" lines).
	wsmall) echo "-q 16 --items write-small --keep --small-file-count $SMALLN" ;;
	wrm) echo "-q 16 --items remove --reuse --small-file-count $SMALLN" ;;
	big) echo "-q 16 --items write-big,read-big,seq-read-1m,seq-write-1m --big-file-size $BIG --io-file-size $IOFILE" ;;
	esac
}

# bench_json SERIES ROUND OUTFILE: records every item of a --json output.
bench_json() {
	python3 - "$1" "$2" "$3" "$RES" <<-'EOF'
	import json, sys
	series, rnd, path, res = sys.argv[1:5]
	j = json.load(open(path))
	with open(res, "a") as f:
	    for it in j["items"]:
	        f.write(f"nfs\t{series}\t{it['name']}\t{rnd}\t{it['value']:.3f}\t{it['unit']}\n")
	    f.write(f"info\t{series}\trtmax\t{rnd}\t{j['server']['rtmax']}\tbytes\n")
	    f.write(f"info\t{series}\twtmax\t{rnd}\t{j['server']['wtmax']}\tbytes\n")
	EOF
}

# The CPU a process has used, in ms (utime + stime of /proc/PID/stat).
cpu_ms() {
	awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' \
		"/proc/$1/stat" 2>/dev/null || echo 0
}

# The server process of a series: the gateway, or ganesha.nfsd.
server_pid() {
	if [ "$1" = mapfs ]; then echo "$GWPID"; else cat "$WORK/ganesha/ganesha.pid"; fi
}

SETTLE_S=${SETTLE_S:-7} # past the gateway's 5 s upload delay
run_group() { # SERIES URL GROUP ROUND
	local out=$WORK/bench-$1-$3-r$4.json pid c0 dir=cmp-$3-r$4
	[ "$3" = wrm ] && dir=cmp-wsmall-r$4 # wsmall's files
	pid=$(server_pid "$1")
	c0=$(cpu_ms "$pid")
	# shellcheck disable=SC2046
	if nsx "$BENCH" -p "$BTHREADS" --duration "$DURATION" $(group_args "$3") \
		--dir "$dir" --json "$2" >"$out" 2>"$out.err"; then
		bench_json "$1" "$4" "$out"
		case $3 in wsmall | wrm)
			sleep "$SETTLE_S"
			printf 'cpu\t%s\t%s\t%s\t%s\tms\n' "$1" "$3" "$4" \
				$(( $(cpu_ms "$pid") - c0 )) >>"$RES" ;;
		esac
	else
		log "mapfs-bench failed against $1 ($3, round $4): $(tail -n 3 "$out.err")"
	fi
}

# No pre-faulting of memory: on a VM with free page reporting (virtio
# balloon; /sys/module/page_reporting) freed guest pages go back to the
# host within seconds, and the next touch faults them in again, so
# touching memory beforehand buys nothing (bench/RESULTS.md).  Whoever
# fills the page cache with new pages pays ~5 us per 4 KiB there.

for r in $(seq "$ROUNDS"); do
	[ $DO_NFS = 1 ] || break
	for g in "${GROUPS_[@]}"; do
		if [ $((r % 2)) = 1 ]; then order="mapfs ganesha"; else order="ganesha mapfs"; fi
		for s in $order; do
			log "round $r/$ROUNDS: $g on $s (load $(cut -d' ' -f1 /proc/loadavg))"
			if [ $s = mapfs ]; then run_group mapfs "$MAPFS_URL" $g $r
			else run_group ganesha "$GANESHA_URL" $g $r; fi
		done
	done
done

# ---------------------------------------------------------------- S3
s3c() { # curl SigV4 against the current S3 server
	curl -s --noproxy '*' -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
		--aws-sigv4 "aws:amz:us-east-1:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$@"
}

s3_start() { # KIND: starts it, loads its env
	local env_text
	env_text=$(MAPFS_S3_WATCH_PID=$$ MAPFS_RGW_STORE_GB=$((3 * S3BYTES * ROUNDS / 1073741824 + 2)) \
		"$ROOT/tests/s3/$1.sh" start 2>"$WORK/$1-start.log") ||
		{ cat "$WORK/$1-start.log" >&2; die "$1 did not start"; }
	set -a; eval "$env_text"; set +a
	S3_DIRS+=("$MAPFS_S3_DIR")
	S3URL=$MAPFS_S3_ENDPOINT/$MAPFS_S3_BUCKET
}

s3_stop() {
	case $MAPFS_S3_SERVER in
	rgw) "$ROOT/tests/s3/rgw.sh" stop "$MAPFS_S3_DIR" 2>/dev/null ;;
	*) "$ROOT/tests/s3/s3rver.sh" stop "$MAPFS_S3_DIR" 2>/dev/null ;;
	esac
}

# s3_raw KIND ROUND: 8 curls at once, each PUTs (then GETs, as one ranged
# GET) 1/8 of S3SIZE.
s3_raw() {
	local part=$((S3BYTES / 8)) i t0 t1 pids=() bad=0
	t0=$(now)
	for i in 0 1 2 3 4 5 6 7; do
		s3c -o /dev/null -w '%{http_code}\n' -T "$WORK/s3part" "$S3URL/raw/r$2-$i" \
			>"$WORK/raw-put-$i" & pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || bad=1; done
	t1=$(now)
	grep -qv '^200$' "$WORK"/raw-put-* && bad=1
	[ $bad = 0 ] && rec limit "$1" raw-put-8 "$2" "$(rate $((part * 8)) "$t0" "$t1")" MiB/s ||
		log "$1: a raw PUT failed"
	pids=() bad=0
	t0=$(now)
	for i in 0 1 2 3 4 5 6 7; do
		s3c -o /dev/null -w '%{http_code} %{size_download}\n' -r "0-$((part - 1))" \
			"$S3URL/raw/r$2-$i" >"$WORK/raw-get-$i" & pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || bad=1; done
	t1=$(now)
	grep -qvx "20[06] $part" "$WORK"/raw-get-* && bad=1
	[ $bad = 0 ] && rec limit "$1" raw-get-8 "$2" "$(rate $((part * 8)) "$t0" "$t1")" MiB/s ||
		log "$1: a raw GET failed"
	for i in 0 1 2 3 4 5 6 7; do s3c -o /dev/null -X DELETE "$S3URL/raw/r$2-$i" || true; done
}

# s3_bench SERIES ROUND ITEM UNIT OUT MAPFS-BENCH-ARGS...: one mapfs-bench
# run (-p 1 -q 16) against $GWURL; records its first item's value as ITEM.
s3_bench() {
	local ser=$1 rnd=$2 item=$3 unit=$4 out=$5
	shift 5
	if "$BENCH" -p 1 -q 16 "$@" --json "$GWURL" >"$out.json" 2>"$out.err"; then
		rec s3 "$ser" "$item" "$rnd" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["items"][0]["value"])' "$out.json")" "$unit"
	else
		log "$ser: $item failed: $(tail -n 3 "$out.err")"
	fi
}

# s3_mapfs SERIES ROUND: mapfs-gw on the store: upload, cold read, small files.
s3_mapfs() {
	local st=$WORK/$1-r$2 key t0 t1 len i out=$WORK/bench-$1-r$2
	local sargs=(--store "s3://$MAPFS_S3_BUCKET/gw" --s3-endpoint "$MAPFS_S3_ENDPOINT"
		--s3-region us-east-1 --s3-path-style --upload-delay 0)
	mkdir -p "$st-a" "$st-b"
	LAUNCH='' start_mapfs "$st-a.log" --state "$st-a" "${sargs[@]}"
	S3GW_PID=$GWPID
	# Upload: from the first WRITE to the whole object being in the bucket
	# (as dd conv=fsync on s3fs: into the local cache, then to the store).
	key=gw/up-r$2/t0/big
	t0=$(now)
	if "$BENCH" -p 1 -q 16 --items write-big --big-file-size "$S3SIZE" --keep \
		--dir "up-r$2" --json "$GWURL" >"$out-write.json" 2>"$out-write.err"; then
		len=
		for i in $(seq 6000); do
			len=$(s3c -o /dev/null -I -w '%{http_code} %header{content-length}' "$S3URL/$key" || true)
			[ "$len" = "200 $S3BYTES" ] && break
			sleep 0.05
		done
		t1=$(now)
		if [ "$len" = "200 $S3BYTES" ]; then
			rec s3 "$1" upload "$2" "$(rate "$S3BYTES" "$t0" "$t1")" MiB/s
		else
			log "$1: $key never reached $S3BYTES bytes in the bucket ($len)"
		fi
	else
		log "$1: write-big failed: $(tail -n 3 "$out-write.err")"
	fi
	stop_mapfs
	# Cold read: a second gateway with an empty cache, same bucket.
	LAUNCH='' start_mapfs "$st-b.log" --state "$st-b" "${sargs[@]}"
	S3GW_PID=$GWPID
	s3_bench "$1" "$2" cold-read MiB/s "$out-read" --items read-big --reuse --keep \
		--big-file-size "$S3SIZE" --dir "up-r$2"
	# Warm read: the same file again, now from the cache.
	s3_bench "$1" "$2" warm-read MiB/s "$out-warm" --items read-big --reuse --keep \
		--big-file-size "$S3SIZE" --dir "up-r$2"
	s3_bench "$1" "$2" small-create files/s "$out-small" --items write-small \
		--small-file-count "$S3SMALLN" --dir "small-r$2"
	stop_mapfs
	# Cold read again with --cache-direct (a third, empty cache): the
	# fetched data bypasses the page cache, whose fresh pages cost more
	# than the GETs on some VMs (bench/RESULTS.md).  This read removes
	# the file.
	mkdir -p "$st-c"
	LAUNCH='' start_mapfs "$st-c.log" --state "$st-c" --cache-direct "${sargs[@]}"
	S3GW_PID=$GWPID
	s3_bench "$1" "$2" cold-read-direct MiB/s "$out-direct" --items read-big --reuse \
		--big-file-size "$S3SIZE" --dir "up-r$2"
	stop_mapfs
	S3GW_PID=
}

# s3_s3fs ROUND: the same file-level work through s3fs-fuse.
s3_s3fs() {
	local d t0 t1 n=$S3SMALLN
	s3fs_mount || die "s3fs did not mount"
	d=$S3FS_MNT/s3fs-r$1
	mkdir -p "$d/small"
	t0=$(now)
	if dd if="$WORK/s3big" of="$d/big" bs=1M conv=fsync status=none; then
		t1=$(now)
		rec s3 s3fs upload "$1" "$(rate "$S3BYTES" "$t0" "$t1")" MiB/s
	fi
	s3fs_umount # and mount again: nothing of big is left in the page cache
	s3fs_mount || die "s3fs did not mount"
	t0=$(now)
	if dd if="$d/big" of=/dev/null bs=1M status=none; then
		t1=$(now)
		rec s3 s3fs cold-read "$1" "$(rate "$S3BYTES" "$t0" "$t1")" MiB/s
	fi
	t0=$(now)
	if seq "$n" | xargs -P 16 -I{} dd if="$WORK/s3small" of="$d/small/f{}" bs=128k status=none; then
		t1=$(now)
		rec s3 s3fs small-create "$1" "$(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", n / (b - a) }')" files/s
	fi
	rm -rf "$d" || true
	s3fs_umount
}

if [ $DO_S3 = 1 ]; then
	head -c $((S3BYTES / 8)) /dev/urandom >"$WORK/s3part"
	for _ in 1 2 3 4 5 6 7 8; do cat "$WORK/s3part"; done >"$WORK/s3big"
	head -c $((128 << 10)) /dev/urandom >"$WORK/s3small"
	kinds=s3rver
	[ $DO_RGW = 0 ] || kinds="s3rver rgw"
	for k in $kinds; do
		log "S3: starting $k"
		s3_start $k
		for r in $(seq "$ROUNDS"); do
			log "S3 round $r/$ROUNDS on $k (load $(cut -d' ' -f1 /proc/loadavg))"
			s3_raw $k $r
			if [ $k = s3rver ] && [ $((r % 2)) = 0 ]; then s3_s3fs $r; fi
			s3_mapfs mapfs-$k $r
			if [ $k = s3rver ] && [ $((r % 2)) = 1 ]; then s3_s3fs $r; fi
		done
		s3_stop
	done
fi

# ---------------------------------------------------------------- the table
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average at end: $LOAD1" >>"$WORK/machine.txt"
python3 - "$RES" "$WORK/machine.txt" "$ROUNDS" "${JSON_OUT:-}" \
	"iperf3 ${IPERF_S}s; fio ${FIO_S}s/job $FIO_SIZE; mapfs-bench -p $BTHREADS --duration $DURATION; big $BIG, io file $IOFILE, $SMALLN small files; S3 $S3SIZE per measurement, $S3SMALLN small files; mapfs-gw --threads $GWTHREADS" <<'EOF'
import json, statistics, sys
from collections import defaultdict
res, machine, rounds, json_out, params = sys.argv[1:6]
vals, units = defaultdict(list), {}
for line in open(res):
    sec, ser, item, rnd, v, unit = line.rstrip("\n").split("\t")
    vals[(sec, ser, item)].append(float(v))
    units[(sec, ser, item)] = unit
med = {k: statistics.median(v) for k, v in vals.items()}

def m(sec, ser, item):
    return med.get((sec, ser, item))

def fmt(v, unit=""):
    if v is None:
        return "-"
    s = f"{v:,.0f}" if v >= 1000 else f"{v:,.1f}"
    return f"{s} {unit}".strip()

def ratio(a, b):
    return a / b if a is not None and b else None

def table(head, rows):
    w = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    line = "+" + "+".join("-" * (x + 2) for x in w) + "+"
    out = [line, "| " + " | ".join(str(h).rjust(w[i]) for i, h in enumerate(head)) + " |", line]
    out += ["| " + " | ".join(str(c).rjust(w[i]) for i, c in enumerate(r)) + " |" for r in rows]
    out.append(line)
    print("\n".join(out))

print(open(machine).read().rstrip())
print(f"rounds: {rounds}; {params}\n")
labels = [("write-big", "Write big file"), ("read-big", "Read big file"),
          ("write-small", "Write small file"), ("read-small", "Read small file"),
          ("stat", "Stat file"), ("remove", "Remove small file, 1 at a time"),
          ("rand-read-4k", "Random read 4K qd32"),
          ("rand-write-4k", "Random write 4K qd32"), ("seq-read-1m", "Seq read 1M"),
          ("seq-write-1m", "Seq write 1M"), ("getattr", "GETATTR qd64"),
          ("lookup", "LOOKUP qd64"), ("access", "ACCESS qd64"), ("null", "NULL qd64")]
rows = []
for item, label in labels:
    a, b = m("nfs", "mapfs", item), m("nfs", "ganesha", item)
    if a is None and b is None:
        continue
    u = units.get(("nfs", "mapfs", item)) or units.get(("nfs", "ganesha", item))
    r = ratio(a, b)
    rows.append([label, fmt(a, u), fmt(b, u), f"{r:.2f}x" if r else "-",
                 len(vals.get(("nfs", "mapfs", item), [])), len(vals.get(("nfs", "ganesha", item), []))])
if rows:
    print("mapfs-gw (file store) vs nfs-ganesha (FSAL_VFS), medians:")
    table(["item", "mapfs-gw", "ganesha", "mapfs/ganesha", "n mapfs", "n ganesha"], rows)

# The servers' CPU (from /proc): per small file written (group wsmall)
# and per REMOVE (group wrm, of those files), each until the gateway's
# store work for them was done.  --small-file-count is the divisor.
nsmall = int(params.split(" small files")[0].split()[-1].replace(",", ""))
rows = []
for ser in ("mapfs", "ganesha"):
    w, wr = m("cpu", ser, "wsmall"), m("cpu", ser, "wrm")
    if w is None and wr is None:
        continue
    us = lambda v: f"{v * 1000 / nsmall:,.0f} us" if v is not None else "-"
    rows.append([ser, us(w), us(wr)])
if rows:
    print("\nserver CPU (utime + stime), medians:")
    table(["server", "per small file written", "per REMOVE"], rows)

rows = []
for ser, item, label in [("iperf3", "loopback-tcp", "loopback TCP, iperf3, 1 stream"),
                         ("fio", "seq-read-1m", "disk: fio 1 MiB seq read, O_DIRECT qd16"),
                         ("fio", "seq-write-1m", "disk: fio 1 MiB seq write, O_DIRECT qd16"),
                         ("fio", "rand-read-4k", "disk: fio 4 KiB rand read, O_DIRECT qd32"),
                         ("s3rver", "raw-get-8", "s3rver: raw 8-way parallel GET"),
                         ("s3rver", "raw-put-8", "s3rver: raw 8-way parallel PUT"),
                         ("rgw", "raw-get-8", "radosgw: raw 8-way parallel GET"),
                         ("rgw", "raw-put-8", "radosgw: raw 8-way parallel PUT")]:
    v = m("limit", ser, item)
    if v is not None:
        rows.append([label, fmt(v, units[("limit", ser, item)]), len(vals[("limit", ser, item)])])
if rows:
    print("\nlimits, measured in the same run (medians):")
    table(["limit", "value", "n"], rows)

rows = []
for item, label in [("cold-read", "cold sequential read"),
                    ("cold-read-direct", "cold sequential read, --cache-direct"),
                    ("warm-read", "warm read (same file, cached)"),
                    ("upload", "big-file upload (until in the bucket)"),
                    ("small-create", "small-file create, 128 KiB, 16 in flight")]:
    a, s, g = m("s3", "mapfs-s3rver", item), m("s3", "s3fs", item), m("s3", "mapfs-rgw", item)
    if a is None and s is None and g is None:
        continue
    u = next(units[k] for k in units if k[0] == "s3" and k[2] == item)
    r = ratio(a, s)
    rows.append([label, fmt(a, u), fmt(s, u), f"{r:.2f}x" if r else "-", fmt(g, u)])
if rows:
    print("\nS3 store: mapfs-gw vs s3fs-fuse on the same s3rver (medians):")
    table(["item", "mapfs-gw/s3rver", "s3fs/s3rver", "mapfs/s3fs", "mapfs-gw/radosgw"], rows)

# Issue 4: the cache engine next to the limits it works within.
pct = lambda a, b: f"{a / b * 100:.0f}%" if a is not None and b else "-"
rows = []
for label, a, lim_label, b in [
        ("cold read, s3 store on s3rver", m("s3", "mapfs-s3rver", "cold-read"),
         "s3rver 8-way ranged GET", m("limit", "s3rver", "raw-get-8")),
        ("cold read, s3 store on radosgw", m("s3", "mapfs-rgw", "cold-read"),
         "radosgw 8-way ranged GET", m("limit", "rgw", "raw-get-8")),
        ("cold read --cache-direct, s3rver", m("s3", "mapfs-s3rver", "cold-read-direct"),
         "s3rver 8-way ranged GET", m("limit", "s3rver", "raw-get-8")),
        ("cold read --cache-direct, radosgw", m("s3", "mapfs-rgw", "cold-read-direct"),
         "radosgw 8-way ranged GET", m("limit", "rgw", "raw-get-8")),
        ("warm read, s3 store (cached)", m("s3", "mapfs-s3rver", "warm-read"),
         "disk: fio seq read", m("limit", "fio", "seq-read-1m")),
        ("cached 1 MiB seq read, file store", m("nfs", "mapfs", "seq-read-1m"),
         "disk: fio seq read", m("limit", "fio", "seq-read-1m")),
        ("write incl. COMMIT (write-big), file store", m("nfs", "mapfs", "write-big"),
         "disk: fio seq write", m("limit", "fio", "seq-write-1m")),
        ("upload to s3rver", m("s3", "mapfs-s3rver", "upload"),
         "s3rver 8-way PUT", m("limit", "s3rver", "raw-put-8"))]:
    if a is None:
        continue
    rows.append([label, fmt(a, "MiB/s"), lim_label, fmt(b, "MiB/s"), pct(a, b)])
if rows:
    print("\ncache engine (issue 4) next to the limits of the same run (medians):")
    table(["item", "mapfs-gw", "limit", "value", "share"], rows)

def check(conds):
    ok = [c for c in conds if c[1] is not None]
    if len(ok) < len(conds):
        return "-", "not measured"
    return ("yes" if all(v >= t for _, v, t in conds) else "no",
            ", ".join(f"{v:.2f}x {n[2:]}" if n.startswith("x ") else f"{v * 100:.0f}% {n}"
                      for n, v, t in conds))

mf = lambda i: m("nfs", "mapfs", i)
gf = lambda i: m("nfs", "ganesha", i)
tgt = [
    ("cached 4 KiB random read IOPS, qd32", ">= 2x ganesha",
     [("x ganesha", ratio(mf("rand-read-4k"), gf("rand-read-4k")), 2)]),
    ("GETATTR ops/s, qd64", ">= 2x ganesha, >= 80% of NULL",
     [("x ganesha", ratio(mf("getattr"), gf("getattr")), 2), ("of NULL", ratio(mf("getattr"), mf("null")), 0.8)]),
    ("LOOKUP ops/s, qd64", ">= 2x ganesha, >= 80% of NULL",
     [("x ganesha", ratio(mf("lookup"), gf("lookup")), 2), ("of NULL", ratio(mf("lookup"), mf("null")), 0.8)]),
    ("small-file write, 128 KiB, 16 in flight", ">= 2x ganesha",
     [("x ganesha", ratio(mf("write-small"), gf("write-small")), 2)]),
    ("cached 1 MiB sequential read", ">= 1.3x ganesha, >= 70% of iperf3",
     [("x ganesha", ratio(mf("seq-read-1m"), gf("seq-read-1m")), 1.3),
      ("of iperf3", ratio(mf("seq-read-1m"), m("limit", "iperf3", "loopback-tcp")), 0.7)]),
    ("big-file write including COMMIT", ">= 1.0x ganesha",
     [("x ganesha", ratio(mf("write-big"), gf("write-big")), 1.0)]),
    ("cold sequential read, s3 store on s3rver", ">= 80% of raw GET, >= 2x s3fs",
     [("of raw GET", ratio(m("s3", "mapfs-s3rver", "cold-read"), m("limit", "s3rver", "raw-get-8")), 0.8),
      ("x s3fs", ratio(m("s3", "mapfs-s3rver", "cold-read"), m("s3", "s3fs", "cold-read")), 2)]),
    ("big-file upload to s3rver", ">= 80% of raw PUT, >= 3x s3fs",
     [("of raw PUT", ratio(m("s3", "mapfs-s3rver", "upload"), m("limit", "s3rver", "raw-put-8")), 0.8),
      ("x s3fs", ratio(m("s3", "mapfs-s3rver", "upload"), m("s3", "s3fs", "upload")), 3)]),
    ("small-file create on the s3 store", ">= 20x s3fs",
     [("x s3fs", ratio(m("s3", "mapfs-s3rver", "small-create"), m("s3", "s3fs", "small-create")), 20)]),
]
rows = []
for name, want, conds in tgt:
    met, got = check(conds)
    rows.append([name, want, got, met])
print("\nissue 5 targets (same-run medians):")
table(["item", "target", "measured", "met"], rows)
if json_out:
    json.dump({"machine": open(machine).read(), "params": params, "rounds": int(rounds),
               "samples": [dict(zip(("section", "series", "item"), k), values=v, unit=units[k])
                           for k, v in vals.items()],
               "medians": [dict(zip(("section", "series", "item"), k), median=v, unit=units[k])
                           for k, v in med.items()],
               "targets": [dict(item=r[0], target=r[1], measured=r[2], met=r[3]) for r in rows]},
              open(json_out, "w"), indent=1)
EOF
