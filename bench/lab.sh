#!/usr/bin/env bash
# bench/lab.sh - machines on one box (issue 46): each gateway, each client,
# PostgreSQL (primary and standby) and the store in a network namespace of
# its own, joined by veth links through one bridge, each with a CPU budget
# of its own (a cgroup's cpu quota) and a disk of its own (an ext4 image
# with a journal on a loop device), so that N gateways are N machines and
# not N processes sharing whatever the box has.
#
#   bench/lab.sh up [options]      make the machines (as root)
#   bench/lab.sh down              stop everything in them, remove them
#   bench/lab.sh status            machines, budgets, what runs, CPU used
#   bench/lab.sh exec M CMD...     run CMD in machine M (its netns, budget)
#   bench/lab.sh calibrate [opts]  the lab proves itself: N independent
#                                  gateways give >= 0.9 x N of one
#   bench/lab.sh scale [opts]      solo1..N and pg1..N (N gateways on one
#                                  PostgreSQL), each gateway its client
#
# up options (each printed by every run, as "LAB budgets ..."):
#   --gateways N        gateways gw1..gwN, each with its client machine
#                       c1..cN (4)
#   --gw-cpu C          a gateway's budget in cores (0.3)
#   --client-cpu C      a client machine's (0.15)
#   --pg-cpu C          PostgreSQL's primary (0.6); --pgs-cpu its standby (0.2)
#   --s3-cpu C          the store's machine (0.3)
#   --period-us P       the quota's period (10000: at the kernel's 100 ms
#                       a budget stalls a many-threaded process for tens
#                       of ms at a time)
#   --rtt MS            round trip between two machines (tc netem, half on
#                       each side); "auto" (the default): 0.25 where the
#                       kernel has netem, none (said so) where it has not
#   --rate R            each link's bandwidth (tc tbf; "10gbit"; none: no
#                       shaping)
#   --disk-mb N         each gateway's and PostgreSQL's disk (1024)
#
# Machines: gwI at 10.79.0.(10+I), cI at 10.79.0.(100+I), pg .5, pgs .6,
# s3 .7; the root namespace is the bridge's 10.79.0.1.  Each gateway's
# disk is mounted at $LAB_DIR/disk/gwI (LAB_DIR: /var/tmp/mapfs-lab).
# cgroup v1 (/sys/fs/cgroup/cpu, usage from cpuacct) or v2 (cpu.max,
# cpu.stat).
#
# calibrate and scale options: --rounds R (3), --files F (creates per
# connection, 10000), --threads T and --depth Q (each client: T
# connections, Q creates in flight each; 2 and 16); calibrate --max N
# (the lab's gateways); scale --configs "solo1 pg1 pg2 ..." (every soloN
# and pgN of the lab's gateways) and --no-standby.  The configurations
# run interleaved round by round (even rounds backwards).  soloN:
# gateways gw1..gwN on LMDB, each with a file store of its own on its
# disk, no cluster.  pgN: gw1..gwN one cluster on PostgreSQL in machine
# pg (a fresh database each run; a synchronous standby in pgs), one file
# store they share (the store's stand-in).  Client cI creates files in
# directories of its own on gwI.  Prints per configuration and round
#   LAB cfg=pg2 item=create round=1 rate=.. gw_cpu_us=.. pg_cpu_us=.. gw_busy=.. pg_busy=.. cl_busy=..
# (rate: the clients' creates/s summed; *_cpu_us: the gateways' and
# PostgreSQL's (primary and standby) CPU per create; busy: the fraction
# of its budget the busiest such machine used), then the medians, each
# against N x its family's first.  calibrate fails (exit 1, "LAB
# calibration FAILED") when a median soloN is below 0.9 x N x solo1:
# then the lab's other figures would measure the box, not the design.
# A run warns when the budgets it uses add up to more than the box's
# CPUs.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
GW=${GW:-$ROOT/build/mapfs-gw}
BENCH=${BENCH:-$ROOT/build/bench/mapfs-bench}
LAB=${LAB_DIR:-/var/tmp/mapfs-lab}
NET=10.79.0
BR=mlabbr0
NSP=mlab-

die() {
	echo "lab: $*" >&2
	exit 2
}

# ---- cgroups ---------------------------------------------------------------

# Sets CGV (1 or 2), CPU_CG (the lab's cpu cgroup) and ACCT_CG (where
# usage is read; v1 only), or says why there is none.
cg_detect() {
	if [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
		CGV=1
		CPU_CG=/sys/fs/cgroup/cpu/mapfs-lab
		if [ -f /sys/fs/cgroup/cpu/cpuacct.usage ]; then
			ACCT_CG=$CPU_CG
		elif [ -f /sys/fs/cgroup/cpuacct/cpuacct.usage ]; then
			ACCT_CG=/sys/fs/cgroup/cpuacct/mapfs-lab
		else
			die "cgroup v1 cpu controller without cpuacct: no way to read a machine's CPU"
		fi
	elif [ -f /sys/fs/cgroup/cgroup.controllers ] &&
		grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
		CGV=2
		CPU_CG=/sys/fs/cgroup/mapfs-lab
		ACCT_CG=$CPU_CG
	else
		die "no cgroup cpu controller (neither v1 /sys/fs/cgroup/cpu nor v2 with cpu): budgets cannot be kept"
	fi
}

# cg_make NAME BUDGET PERIOD_US: the machine's cgroup; BUDGET in cores
# ("none": no limit).
cg_make() {
	local name=$1 budget=$2 period=$3 quota=-1
	[ "$budget" = none ] || quota=$(awk -v b="$budget" -v p="$period" 'BEGIN { printf "%d", b * p }')
	if [ "$CGV" = 1 ]; then
		mkdir -p "$CPU_CG/$name" "$ACCT_CG/$name"
		echo "$period" >"$CPU_CG/$name/cpu.cfs_period_us"
		echo "$quota" >"$CPU_CG/$name/cpu.cfs_quota_us"
	else
		grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control ||
			echo +cpu >/sys/fs/cgroup/cgroup.subtree_control
		mkdir -p "$CPU_CG/$name"
		grep -qw cpu "$CPU_CG/cgroup.subtree_control" ||
			echo +cpu >"$CPU_CG/cgroup.subtree_control"
		if [ "$quota" = -1 ]; then
			echo "max $period" >"$CPU_CG/$name/cpu.max"
		else
			echo "$quota $period" >"$CPU_CG/$name/cpu.max"
		fi
	fi
}

# The CPU a machine used since it was made, in microseconds.
cg_usage_us() {
	if [ "$CGV" = 1 ]; then
		echo $(($(cat "$ACCT_CG/$1/cpuacct.usage") / 1000))
	else
		sed -n 's/^usage_usec //p' "$CPU_CG/$1/cpu.stat"
	fi
}

# The processes in a machine's cgroup.
cg_pids() {
	cat "$CPU_CG/$1/cgroup.procs" 2>/dev/null || true
	[ "$ACCT_CG" = "$CPU_CG" ] || cat "$ACCT_CG/$1/cgroup.procs" 2>/dev/null || true
}

cg_remove() {
	local d
	for d in "$CPU_CG/$1" "$ACCT_CG/$1"; do
		[ -d "$d" ] && rmdir "$d" 2>/dev/null || true
	done
}

# ---- machines --------------------------------------------------------------

# The lab's settings and machines (made by up): lab.env, machines.
load() {
	[ -f "$LAB/lab.env" ] || die "no lab is up (bench/lab.sh up)"
	# shellcheck disable=SC1091
	source "$LAB/lab.env"
	cg_detect
}

# machine_add NAME LAST_OCTET BUDGET
machine_add() {
	local name=$1 ip=$NET.$2 budget=$3 ns=$NSP$1 veth=mlv-$1
	ip netns add "$ns" || die "cannot make network namespace $ns"
	ip link add "$veth" type veth peer name eth0 netns "$ns" ||
		die "cannot make the link of $name"
	ip link set "$veth" master "$BR" up
	ip netns exec "$ns" sh -e -c "ip link set lo up
		ip addr add $ip/24 dev eth0
		ip link set eth0 up"
	# The link: latency (netem, half of the round trip on each side) and
	# bandwidth (netem's rate, or tbf alone).
	local half
	half=$(awk -v r="$RTT_MS" 'BEGIN { printf "%.3f", r / 2 }')
	if [ "$RTT_MS" != none ] && [ "$RTT_MS" != 0 ]; then
		if [ "$RATE" = none ]; then
			ip netns exec "$ns" tc qdisc add dev eth0 root netem delay "${half}ms" limit 100000
		else
			ip netns exec "$ns" tc qdisc add dev eth0 root netem delay "${half}ms" rate "$RATE" limit 100000
		fi
	elif [ "$RATE" != none ]; then
		ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$RATE" burst 4mb latency 50ms
	fi
	cg_make "$name" "$budget" "$PERIOD_US"
	echo "$name $ip $budget" >>"$LAB/machines"
}

# disk_add NAME: an ext4 image with a journal, on a loop device, at
# $LAB/disk/NAME (the machine's own disk: its flushes are its own).
disk_add() {
	local img=$LAB/img/$1.img mnt=$LAB/disk/$1
	mkdir -p "$LAB/img" "$mnt"
	truncate -s "${DISK_MB}M" "$img"
	mkfs.ext4 -q -F -O has_journal "$img" || die "mkfs.ext4 of $1's disk failed"
	mount -o loop "$img" "$mnt" || die "cannot mount $1's disk (loop devices?)"
	chmod 755 "$mnt"
}

machine_ip() {
	awk -v m="$1" '$1 == m { print $2 }' "$LAB/machines"
}

machine_budget() {
	awk -v m="$1" '$1 == m { print $3 }' "$LAB/machines"
}

# lab_exec NAME CMD...: CMD in the machine's namespace and cgroup.
lab_exec() {
	local name=$1
	shift
	[ -n "$(machine_ip "$name")" ] || die "no machine $name (bench/lab.sh status)"
	(
		echo "$BASHPID" >"$CPU_CG/$name/cgroup.procs"
		[ "$ACCT_CG" = "$CPU_CG" ] || echo "$BASHPID" >"$ACCT_CG/$name/cgroup.procs"
		exec ip netns exec "$NSP$name" "$@"
	)
}

print_budgets() {
	local rtt=$RTT_MS
	[ "$rtt" = none ] && rtt="none($RTT_WHY)"
	echo "LAB budgets gw_cpu=$GW_CPU client_cpu=$CLIENT_CPU pg_cpu=$PG_CPU pgs_cpu=$PGS_CPU s3_cpu=$S3_CPU period_us=$PERIOD_US rtt_ms=$rtt rate=$RATE gateways=$GATEWAYS cgroup=v$CGV host_cpus=$(nproc)"
}

cmd_up() {
	GATEWAYS=4 GW_CPU=0.3 CLIENT_CPU=0.15 PG_CPU=0.6 PGS_CPU=0.2 S3_CPU=0.3
	PERIOD_US=10000 RTT_MS=auto RATE=10gbit DISK_MB=1024
	while [ $# -gt 0 ]; do
		case $1 in
		--gateways) GATEWAYS=$2; shift ;;
		--gw-cpu) GW_CPU=$2; shift ;;
		--client-cpu) CLIENT_CPU=$2; shift ;;
		--pg-cpu) PG_CPU=$2; shift ;;
		--pgs-cpu) PGS_CPU=$2; shift ;;
		--s3-cpu) S3_CPU=$2; shift ;;
		--period-us) PERIOD_US=$2; shift ;;
		--rtt) RTT_MS=$2; shift ;;
		--rate) RATE=$2; shift ;;
		--disk-mb) DISK_MB=$2; shift ;;
		*) die "unknown option $1 (see the head of bench/lab.sh)" ;;
		esac
		shift
	done
	[ "$(id -u)" = 0 ] || die "needs root (network namespaces, cgroups, loop devices)"
	[[ $GATEWAYS =~ ^[1-9][0-9]?$ ]] && [ "$GATEWAYS" -le 16 ] || die "--gateways: 1..16"
	for b in "$GW_CPU" "$CLIENT_CPU" "$PG_CPU" "$PGS_CPU" "$S3_CPU"; do
		[ "$b" = none ] || [[ $b =~ ^[0-9]*\.?[0-9]+$ ]] && awk -v b="$b" 'BEGIN { exit !(b == "none" || (b >= 0.01 && b <= 256)) }' ||
			die "a budget is cores, 0.01..256 or none: not '$b'"
	done
	[[ $PERIOD_US =~ ^[0-9]+$ ]] && [ "$PERIOD_US" -ge 1000 ] && [ "$PERIOD_US" -le 1000000 ] ||
		die "--period-us: 1000..1000000"
	[[ $DISK_MB =~ ^[0-9]+$ ]] && [ "$DISK_MB" -ge 64 ] || die "--disk-mb: at least 64"
	[ -f "$LAB/lab.env" ] && die "a lab is up already ($LAB): bench/lab.sh down first"
	cg_detect
	command -v tc >/dev/null || die "no tc (apt-get install iproute2)"
	ip netns add mlab-probe 2>/dev/null || die "cannot make network namespaces here"
	RTT_WHY=
	local netem=1
	ip netns exec mlab-probe tc qdisc add dev lo root netem delay 1ms 2>/dev/null || netem=0
	ip netns del mlab-probe
	if [ "$RTT_MS" = auto ]; then
		if [ $netem = 1 ]; then
			RTT_MS=0.25
		else
			RTT_MS=none RTT_WHY="no sch_netem in this kernel"
		fi
	elif [ "$RTT_MS" != none ] && [ "$RTT_MS" != 0 ]; then
		[[ $RTT_MS =~ ^[0-9]*\.?[0-9]+$ ]] || die "--rtt: milliseconds, auto or none"
		[ $netem = 1 ] || die "--rtt $RTT_MS: this kernel has no sch_netem (use --rtt none)"
	else
		RTT_MS=none RTT_WHY="asked"
	fi
	mkdir -p "$LAB"
	: >"$LAB/machines"
	cat >"$LAB/lab.env" <<EOF
GATEWAYS=$GATEWAYS GW_CPU=$GW_CPU CLIENT_CPU=$CLIENT_CPU PG_CPU=$PG_CPU PGS_CPU=$PGS_CPU S3_CPU=$S3_CPU
PERIOD_US=$PERIOD_US RTT_MS=$RTT_MS RTT_WHY="$RTT_WHY" RATE=$RATE DISK_MB=$DISK_MB
EOF
	# From here a failure leaves a half lab: down removes what is there.
	trap 'echo "lab: up failed; removing what was made" >&2; cmd_down >/dev/null 2>&1' ERR
	ip link add "$BR" type bridge || die "cannot make the bridge $BR"
	ip addr add "$NET.1/24" dev "$BR"
	ip link set "$BR" up
	mkdir -p "$CPU_CG" "$ACCT_CG"
	for i in $(seq "$GATEWAYS"); do
		machine_add "gw$i" $((10 + i)) "$GW_CPU"
		disk_add "gw$i"
		machine_add "c$i" $((100 + i)) "$CLIENT_CPU"
	done
	machine_add pg 5 "$PG_CPU"
	disk_add pg
	machine_add pgs 6 "$PGS_CPU"
	disk_add pgs
	machine_add s3 7 "$S3_CPU"
	trap - ERR
	print_budgets
	echo "lab: up: $(wc -l <"$LAB/machines") machines (bench/lab.sh status)"
}

cmd_down() {
	[ -f "$LAB/lab.env" ] || { echo "lab: nothing is up"; return 0; }
	load
	local m p
	# Every process of every machine, then the machines.
	for sig in TERM KILL; do
		while read -r m _; do
			for p in $(cg_pids "$m"); do kill -s $sig "$p" 2>/dev/null || true; done
		done <"$LAB/machines"
		[ $sig = TERM ] && sleep 1
	done
	while read -r m _; do
		mountpoint -q "$LAB/disk/$m" 2>/dev/null && umount "$LAB/disk/$m"
		ip netns del "$NSP$m" 2>/dev/null || true
		ip link del "mlv-$m" 2>/dev/null || true
		cg_remove "$m"
	done <"$LAB/machines"
	ip link del "$BR" 2>/dev/null || true
	for d in "$CPU_CG" "$ACCT_CG"; do [ -d "$d" ] && rmdir "$d" 2>/dev/null || true; done
	rm -rf "$LAB"
	echo "lab: down"
}

cmd_status() {
	load
	print_budgets
	printf '%-5s %-12s %-7s %6s %12s\n' machine address budget procs cpu_s
	while read -r m ip b; do
		printf '%-5s %-12s %-7s %6s %12s\n' "$m" "$ip" "$b" "$(cg_pids "$m" | sort -u | wc -l)" \
			"$(awk -v u="$(cg_usage_us "$m")" 'BEGIN { printf "%.2f", u / 1e6 }')"
	done <"$LAB/machines"
}

# ---- PostgreSQL: a primary in pg, its synchronous standby in pgs ---------

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
pg_user() {
	if getent passwd postgres >/dev/null; then echo postgres; else echo nobody; fi
}

# pg_cmd MACHINE CMD...: CMD as PostgreSQL's user in MACHINE.
pg_cmd() {
	local m=$1
	shift
	lab_exec "$m" runuser -u "$(pg_user)" -- "$@"
}

# psql on the primary's socket (no network needed).
pg_sql() {
	PGOPTIONS="-c client_min_messages=warning" runuser -u "$(pg_user)" -- "$PGBIN/psql" -X -q -At -h "$LAB/disk/pg/sock" -p 5432 -U mapfs -d postgres "$@"
}

# The primary (and, unless --no-standby, its synchronous standby), each on
# its machine's disk, listening on its address, port 5432.  Durable:
# fsync on, synchronous_commit on.
pg_up() {
	local standby=$1 u
	u=$(pg_user)
	[ -x "$PGBIN/initdb" ] || die "no $PGBIN/initdb (apt-get install postgresql)"
	pg_down
	local d=$LAB/disk/pg
	rm -rf "$d/data" "$d/sock"
	mkdir -p "$d/sock"
	chown "$u" "$d" "$d/sock"
	runuser -u "$u" -- "$PGBIN/initdb" -N -D "$d/data" -U mapfs -A trust -E UTF8 \
		--locale=C.UTF-8 >"$LAB/pg-initdb.log" 2>&1 || die "initdb: $(tail -3 "$LAB/pg-initdb.log")"
	printf 'host all all %s.0/24 trust\nhost replication all %s.0/24 trust\n' "$NET" "$NET" \
		>>"$d/data/pg_hba.conf"
	pg_cmd pg "$PGBIN/pg_ctl" -D "$d/data" -w -t 60 -l "$d/log" -o \
		"-p 5432 -k $d/sock -c listen_addresses=$(machine_ip pg) -c max_connections=300 -c shared_buffers=128MB" \
		start >/dev/null || die "PostgreSQL did not start: $(tail -3 "$d/log" | tr '\n' ' ')"
	[ "$standby" = 1 ] || return 0
	local s=$LAB/disk/pgs
	rm -rf "$s/data" "$s/sock"
	mkdir -p "$s/sock"
	chown "$u" "$s" "$s/sock"
	pg_cmd pgs "$PGBIN/pg_basebackup" -d "host=$(machine_ip pg) port=5432 user=mapfs application_name=s1" \
		-D "$s/data" -R -X stream -c fast >"$LAB/pgs-basebackup.log" 2>&1 ||
		die "pg_basebackup: $(tail -3 "$LAB/pgs-basebackup.log")"
	pg_cmd pgs "$PGBIN/pg_ctl" -D "$s/data" -w -t 60 -l "$s/log" -o \
		"-p 5432 -k $s/sock -c listen_addresses=$(machine_ip pgs) -c max_connections=300 -c shared_buffers=128MB" \
		start >/dev/null || die "the standby did not start: $(tail -3 "$s/log" | tr '\n' ' ')"
	pg_sql -c "ALTER SYSTEM SET synchronous_standby_names = 's1'" -c "SELECT pg_reload_conf()" >/dev/null
	local st=
	for _ in $(seq 100); do
		st=$(pg_sql -c "SELECT sync_state FROM pg_stat_replication WHERE application_name = 's1'")
		[ "$st" = sync ] && return 0
		sleep 0.1
	done
	die "the standby is not synchronous ($st)"
}

pg_down() {
	local m
	for m in pgs pg; do
		[ -f "$LAB/disk/$m/data/postmaster.pid" ] || continue
		runuser -u "$(pg_user)" -- "$PGBIN/pg_ctl" -D "$LAB/disk/$m/data" -m fast -w -t 30 stop \
			>/dev/null 2>&1 || true
	done
}

# ---- runs: gateways, their clients, the figures ---------------------------

# gw_start I [META]: a gateway in machine gwI, on its own disk, with a
# file store of its own (solo) or, in a cluster (META: PostgreSQL's URL),
# the cluster's store ($CLUSTER_STORE); waits for it to answer.
gw_start() {
	local i=$1 meta=${2:-} d=$LAB/disk/gw$1/run store
	rm -rf "$d"
	mkdir -p "$d/state" "$d/store"
	store=$d/store
	[ -z "$meta" ] || store=$CLUSTER_STORE
	echo "/mapfs $NET.0/24(rw,no_root_squash,insecure)" >"$d/exports"
	local args=(--state "$d/state" --store "file://$store" --exports "$d/exports"
		--bind "$(machine_ip "gw$i")" --nfs-port 2049 --mount-port 20048 --no-rpcbind
		--foreground --threads 1 --log-level warn)
	[ -z "$meta" ] || args+=(--meta "$meta" --node "n$i")
	lab_exec "gw$i" "$GW" "${args[@]}" >"$d/out" 2>"$d/err" &
	for _ in $(seq 300); do grep -q ready "$d/out" 2>/dev/null && return 0; sleep 0.1; done
	cat "$d/err" >&2
	die "gateway gw$i did not start"
}

gw_stop_all() {
	local i p
	for i in $(seq "$GATEWAYS"); do
		for p in $(cg_pids "gw$i"); do kill "$p" 2>/dev/null || true; done
	done
	for _ in $(seq 100); do
		local left=0
		for i in $(seq "$GATEWAYS"); do
			[ -z "$(cg_pids "gw$i")" ] || left=1
		done
		[ $left = 0 ] && return 0
		sleep 0.1
	done
	for i in $(seq "$GATEWAYS"); do
		for p in $(cg_pids "gw$i"); do kill -9 "$p" 2>/dev/null || true; done
	done
}

url_of() {
	echo "nfs://$(machine_ip "gw$1")/mapfs?nfsport=2049&mountport=20048&version=3"
}

# run_cfg OUT ROUND CFG: the create item on configuration CFG (soloN or
# pgN): client cI creates in directories of its own on gwI.  Prints the
# LAB line and appends it to OUT/lines.
run_cfg() {
	local out=$1 r=$2 cfg=$3 n meta=
	case $cfg in
	solo[1-9]*) n=${cfg#solo} ;;
	pg[1-9]*)
		n=${cfg#pg}
		local db="r${r}_$cfg"
		pg_sql -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null ||
			die "CREATE DATABASE $db failed"
		meta="postgresql://mapfs@$(machine_ip pg):5432/$db"
		CLUSTER_STORE=$LAB/store/$db
		rm -rf "$CLUSTER_STORE"
		mkdir -p "$CLUSTER_STORE"
		;;
	*) die "no configuration $cfg (solo1..solo$GATEWAYS, pg1..pg$GATEWAYS)" ;;
	esac
	[ "$n" -le "$GATEWAYS" ] || die "$cfg: the lab has $GATEWAYS gateways"
	local i m
	for i in $(seq "$n"); do gw_start "$i" "$meta"; done
	local names=() u0=() u1=() pids=()
	for i in $(seq "$n"); do names+=("gw$i" "c$i"); done
	[ -z "$meta" ] || names+=(pg pgs)
	for m in "${names[@]}"; do u0+=("$(cg_usage_us "$m")"); done
	local t0 t1
	t0=$(date +%s%N)
	for i in $(seq "$n"); do
		lab_exec "c$i" "$BENCH" -p "$THREADS" -q "$DEPTH" --keep \
			--small-file-count "$FILES" --items create --json "$(url_of "$i")" \
			>"$out/$r-$cfg-$i.json" 2>"$out/$r-$cfg-$i.err" &
		pids+=($!)
	done
	local failed=
	for i in $(seq "$n"); do
		wait "${pids[$((i - 1))]}" || failed="$failed c$i"
	done
	t1=$(date +%s%N)
	for m in "${names[@]}"; do u1+=("$(cg_usage_us "$m")"); done
	# A machine that died in the run is named.
	for i in $(seq "$n"); do
		[ -n "$(cg_pids "gw$i")" ] || failed="$failed gw$i(died)"
	done
	gw_stop_all
	# Each run meets the same PostgreSQL: the database gone, its pages
	# written out, before the next.
	if [ -n "$meta" ]; then
		pg_sql -c "DROP DATABASE IF EXISTS r${r}_$cfg" -c "CHECKPOINT" >/dev/null || true
		rm -rf "$CLUSTER_STORE"
	fi
	if [ -n "$failed" ]; then
		tail -n 3 "$out/$r-$cfg-"*.err >&2 2>/dev/null || true
		for i in $(seq "$n"); do tail -n 3 "$LAB/disk/gw$i/run/err" >&2 2>/dev/null || true; done
		die "$cfg round $r failed:$failed"
	fi
	local k=0 usage=""
	for m in "${names[@]}"; do
		usage="$usage $m=$((${u1[$k]} - ${u0[$k]}))"
		k=$((k + 1))
	done
	python3 "$HERE/lab_line.py" line "$out" "$r" "$cfg" "$n" "$(((t1 - t0) / 1000))" "$usage" \
		"$LAB/lab.env" | tee -a "$out/lines"
}

# The budgets the configurations use, beside the host's CPUs: a lab that
# asks for more than the box has measures the box.
budget_check() {
	local need
	need=$(python3 "$HERE/lab_line.py" need "$GW_CPU" "$CLIENT_CPU" "$PG_CPU" "$PGS_CPU" "$@")
	if awk -v n="$need" -v h="$(nproc)" 'BEGIN { exit !(n > h) }'; then
		echo "LAB warning: the biggest configuration's budgets sum to $need cores, the box has $(nproc): its figures are the box's (lower the budgets or run fewer gateways)"
	fi
}

scale_opts() {
	ROUNDS=3 FILES=10000 THREADS=2 DEPTH=16 STANDBY=1 CONFIGS=
	while [ $# -gt 0 ]; do
		case $1 in
		--configs) CONFIGS=$2; shift ;;
		--max)
			[[ $2 =~ ^[1-9][0-9]*$ ]] || die "--max: a number of gateways"
			CONFIGS=$(seq -f 'solo%g' 1 "$2" | tr '\n' ' ')
			shift
			;;
		--rounds) ROUNDS=$2; shift ;;
		--files) FILES=$2; shift ;;
		--threads) THREADS=$2; shift ;;
		--depth) DEPTH=$2; shift ;;
		--no-standby) STANDBY=0 ;;
		*) die "unknown option $1 (see the head of bench/lab.sh)" ;;
		esac
		shift
	done
	local v
	for v in "$ROUNDS" "$FILES" "$THREADS" "$DEPTH"; do
		[[ $v =~ ^[1-9][0-9]*$ ]] || die "--rounds, --files, --threads, --depth: positive integers, not '$v'"
	done
}

# scale_run: every configuration of CONFIGS, interleaved round by round
# (even rounds backwards); the lines in $LAB/scale/lines, then medians.
scale_run() {
	[ -x "$GW" ] && [ -x "$BENCH" ] || die "build first (cmake --build build)"
	print_budgets
	budget_check $CONFIGS
	SCALE_OUT=$LAB/scale
	rm -rf "$SCALE_OUT"
	mkdir -p "$SCALE_OUT" "$LAB/store"
	local cfgs=($CONFIGS) want_pg=0 r c k
	for c in "${cfgs[@]}"; do [[ $c == pg* ]] && want_pg=1; done
	trap 'gw_stop_all; pg_down' EXIT
	[ $want_pg = 0 ] || pg_up "$STANDBY"
	for r in $(seq "$ROUNDS"); do
		local order=("${cfgs[@]}")
		if [ $((r % 2)) = 0 ]; then
			order=()
			for ((k = ${#cfgs[@]} - 1; k >= 0; k--)); do order+=("${cfgs[$k]}"); done
		fi
		for c in "${order[@]}"; do run_cfg "$SCALE_OUT" "$r" "$c"; done
	done
	gw_stop_all
	pg_down
	trap - EXIT
	rm -rf "$LAB/store"
	python3 "$HERE/lab_line.py" medians "$SCALE_OUT/lines"
}

cmd_calibrate() {
	load
	scale_opts --max "$GATEWAYS" "$@"
	[[ $CONFIGS =~ ^(solo[0-9]+ ?)+$ ]] || die "calibrate runs soloN only (--max N)"
	scale_run
	python3 "$HERE/lab_line.py" calibrate "$SCALE_OUT/lines"
}

cmd_scale() {
	load
	scale_opts "$@"
	[ -n "$CONFIGS" ] ||
		CONFIGS="$(seq -f 'solo%g' 1 "$GATEWAYS" | tr '\n' ' ')$(seq -f 'pg%g' 1 "$GATEWAYS" | tr '\n' ' ')"
	scale_run
}

# Sourced (tests/faults/campaign.sh, which makes its machines with these
# functions, in the same place: bench/lab.sh status and down see them):
# the functions only.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0
cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
up) cmd_up "$@" ;;
down) cmd_down ;;
status) cmd_status ;;
exec)
	[ $# -ge 2 ] || die "usage: bench/lab.sh exec MACHINE CMD..."
	load
	lab_exec "$@"
	;;
calibrate) cmd_calibrate "$@" ;;
scale) cmd_scale "$@" ;;
-h | --help | "") sed -n '2,50p' "$0" ;;
*) die "unknown command $cmd (up, down, status, exec, calibrate, scale)" ;;
esac
