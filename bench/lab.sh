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
# calibrate options: --max N (the gateways up), --rounds R (3),
# --files F (creates per connection, 10000), --threads T and --depth Q
# (each client: T connections, Q creates in flight each; 2 and 16).  Configurations solo1..soloMAX run
# interleaved round by round: gateways gw1..gwN on LMDB, each with a file
# store of its own on its disk, no cluster; client cI creates files in
# its own directories on gwI.  Prints per configuration and round
#   LAB cfg=solo2 item=create round=1 rate=.. gw_cpu_us=.. gw_busy=.. cl_busy=..
# (rate: the clients' creates/s summed; gw_cpu_us: the gateways' CPU per
# create; busy: the fraction of its budget the busiest such machine
# used), then the medians, and fails (exit 1, "LAB calibration FAILED")
# when a median soloN is below 0.9 x N x solo1: then the lab's other
# figures would measure the box, not the design.
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

# ---- the calibration: independent gateways --------------------------------

# gw_start I: a gateway alone (LMDB, a file store) in machine gwI, on
# its own disk; waits for it to answer.
gw_start() {
	local i=$1 d=$LAB/disk/gw$1/run
	rm -rf "$d"
	mkdir -p "$d/state" "$d/store"
	echo "/mapfs $NET.0/24(rw,no_root_squash,insecure)" >"$d/exports"
	lab_exec "gw$i" "$GW" --state "$d/state" --store "file://$d/store" \
		--exports "$d/exports" --bind "$(machine_ip "gw$i")" --nfs-port 2049 \
		--mount-port 20048 --no-rpcbind --foreground --threads 1 \
		--log-level warn >"$d/out" 2>"$d/err" &
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

cmd_calibrate() {
	local max= rounds=3 files=10000 threads=2 depth=16
	while [ $# -gt 0 ]; do
		case $1 in
		--max) max=$2; shift ;;
		--rounds) rounds=$2; shift ;;
		--files) files=$2; shift ;;
		--threads) threads=$2; shift ;;
		--depth) depth=$2; shift ;;
		*) die "calibrate: unknown option $1" ;;
		esac
		shift
	done
	load
	[ -x "$GW" ] && [ -x "$BENCH" ] || die "build first (cmake --build build)"
	max=${max:-$GATEWAYS}
	[ "$max" -le "$GATEWAYS" ] || die "calibrate --max $max: the lab has $GATEWAYS gateways"
	print_budgets
	local out=$LAB/calibrate
	rm -rf "$out"
	mkdir -p "$out"
	trap 'gw_stop_all' EXIT
	for r in $(seq "$rounds"); do
		local order
		order=$(seq "$max")
		[ $((r % 2)) = 0 ] && order=$(seq "$max" -1 1)
		for n in $order; do
			for i in $(seq "$n"); do gw_start "$i"; done
			local names=() u0=() u1=() pids=()
			for i in $(seq "$n"); do names+=("gw$i" "c$i"); done
			for m in "${names[@]}"; do u0+=("$(cg_usage_us "$m")"); done
			local t0 t1
			t0=$(date +%s%N)
			for i in $(seq "$n"); do
				lab_exec "c$i" "$BENCH" -p "$threads" -q "$depth" --keep \
					--small-file-count "$files" --items create --json "$(url_of "$i")" \
					>"$out/$r-$n-$i.json" 2>"$out/$r-$n-$i.err" &
				pids+=($!)
			done
			local failed=
			for i in $(seq "$n"); do
				wait "${pids[$((i - 1))]}" || failed="$failed c$i"
			done
			t1=$(date +%s%N)
			for m in "${names[@]}"; do u1+=("$(cg_usage_us "$m")"); done
			gw_stop_all
			[ -z "$failed" ] || {
				tail -3 "$out/$r-$n-"*.err >&2
				die "calibrate: the client machine(s)$failed failed (round $r, solo$n)"
			}
			local k=0 usage=""
			for m in "${names[@]}"; do
				usage="$usage $m=$((${u1[$k]} - ${u0[$k]}))"
				k=$((k + 1))
			done
			python3 - "$out" "$r" "$n" "$(((t1 - t0) / 1000))" "$usage" <<'EOF' | tee -a "$out/lines"
import json, sys
out, r, n, wall_us, usage = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
env = dict(l.split("=", 1) for l in open(out + "/../lab.env").read().split() if "=" in l)
use = {k: int(v) for k, v in (u.split("=") for u in usage.split())}
rate = files = 0.0
for i in range(1, n + 1):
    it = [x for x in json.load(open(f"{out}/{r}-{n}-{i}.json"))["items"] if x["name"] == "create"][0]
    rate += it["value"]
    files += it["files"]
gw_us = sum(v for k, v in use.items() if k.startswith("gw"))
busy = lambda pfx, b: max(v for k, v in use.items() if k.startswith(pfx)) / (float(b) * wall_us) if b != "none" else 0
per = gw_us / files if files else 0
print(f"LAB cfg=solo{n} item=create round={r} rate={rate:.0f} gw_cpu_us={per:.0f} "
      f"gw_busy={busy('gw', env['GW_CPU']):.2f} cl_busy={busy('c', env['CLIENT_CPU']):.2f}")
EOF
		done
	done
	trap - EXIT
	python3 - "$out/lines" "$max" <<'EOF'
import re, statistics, sys
rows = {}
for l in open(sys.argv[1]):
    d = dict(kv.split("=") for kv in l.split()[1:])
    rows.setdefault(int(d["cfg"][4:]), []).append(d)
med = {}
for n in sorted(rows):
    m = {k: statistics.median(float(d[k]) for d in rows[n]) for k in ("rate", "gw_cpu_us", "gw_busy", "cl_busy")}
    med[n] = m["rate"]
    print(f"LAB cfg=solo{n} item=create median rate={m['rate']:.0f} gw_cpu_us={m['gw_cpu_us']:.0f} "
          f"gw_busy={m['gw_busy']:.2f} cl_busy={m['cl_busy']:.2f} of_n_x_solo1={m['rate'] / (n * med[1]):.2f}")
bad = [n for n in med if med[n] < 0.9 * n * med[1]]
if bad:
    print(f"LAB calibration FAILED: solo{bad[0]} gives {med[bad[0]] / med[1]:.2f} x solo1, "
          f"needs {0.9 * bad[0]:.1f}: the box, not the design, sets these figures")
    sys.exit(1)
print(f"LAB calibration passed: solo1..solo{max(med)} within 0.9 x N of solo1")
EOF
}

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
-h | --help | "") sed -n '2,50p' "$0" ;;
*) die "unknown command $cmd (up, down, status, exec, calibrate)" ;;
esac
