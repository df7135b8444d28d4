#!/usr/bin/env bash
# tests/faults/campaign.sh --seed S --minutes M [options] - the cluster
# under fire (issue 48): faults scheduled at random from a seed while
# clients call, then a heal, the final reads through every gateway and a
# fresh one (once every replica shows a name made after the heal),
# `mapfs-gw fsck` on each, and tests/faults/check.py over the
# whole history.  Last line, exactly:
#   CAMPAIGN seed=S minutes=M ops=N ok=K unknown=U faults=F violations=V
#
# The machines are bench/lab.sh's (each in a network namespace with a CPU
# budget; the lab must not be up already): gateways gw1..gwG in one
# cluster on PostgreSQL (primary pg, synchronous standby pgs), one file
# store they share (the store's stand-in: radosgw in the lab is still to
# come), client machines c1..cC, each client calling every gateway.  One
# more gateway machine is kept for the end: a gateway with empty state
# joins the cluster and reads everything back.
#
# Options:
#   --seed S        the schedule's seed (and the clients')
#   --minutes M     the whole run: a calm first (a quarter, at most 60 s),
#                   then the faults, each followed by a pause (decimals ok)
#   --gateways G    3;  --clients C  2
#   --faults LIST   the kinds to draw from (comma list; all by default):
#                   kill9 (a gateway, restarted after 0-10 s), stop
#                   (SIGSTOP 1-15 s), part-pg (a gateway cut from
#                   PostgreSQL 5-30 s), part-client (a client cut from a
#                   gateway 5-30 s), pg-failover (PostgreSQL's primary
#                   killed -9, its synchronous standby promoted, the old
#                   primary back as the new standby after 0-10 s; only
#                   when named: the seeds of the runs before it keep
#                   their schedules), syncrep-cut (the standby cut off
#                   from the primary 3-15 s, the gateways' commits in
#                   their wait for it cancelled or ended, and half the
#                   time the primary then killed and the standby, which
#                   lacks them, promoted; only when named), part-store
#                   (n/a with the file store)
#   --out DIR       where the run's files go (a temp dir; kept): the
#                   clients' call logs, faults.log, the walks, each
#                   gateway's fsck and log, check.txt
#   --keep          leave the lab up at the end (bench/lab.sh down)
# CAMPAIGN_LOG_LEVEL=debug: the gateways' log level (info).
#
# Faults are one at a time.  Not yet: netem
# (this kernel has no sch_netem), radosgw, the kernel client in QEMU, the
# lossy disk: said by every run.  Exit: 0 no violation, 1 violations,
# 2 the campaign itself could not run (a machine that cannot start, a
# checker that cannot read a history): never a pass.
set -euo pipefail
FAULTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FCLIENT=${FCLIENT:-$FAULTS_DIR/../../build/tests/fclient}
# (sets HERE, ROOT, GW, LAB, PGBIN and the machines' functions)
# shellcheck source=../../bench/lab.sh
source "$FAULTS_DIR/../../bench/lab.sh"

SEED= MINUTES= NGW=3 NCL=2 OUT= KEEP=0
KINDS=kill9,stop,part-pg,part-client
while [ $# -gt 0 ]; do
	case $1 in
	--seed) SEED=$2; shift ;;
	--minutes) MINUTES=$2; shift ;;
	--gateways) NGW=$2; shift ;;
	--clients) NCL=$2; shift ;;
	--faults) KINDS=$2; shift ;;
	--out) OUT=$2; shift ;;
	--keep) KEEP=1 ;;
	-h | --help) sed -n '2,39p' "$0"; exit 0 ;;
	*) echo "campaign: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[[ $SEED =~ ^[0-9]+$ ]] || { echo "campaign: --seed N needed" >&2; exit 2; }
[[ $MINUTES =~ ^[0-9]*\.?[0-9]+$ ]] || { echo "campaign: --minutes M needed" >&2; exit 2; }
[[ $NGW =~ ^[1-9]$ ]] && [[ $NCL =~ ^[1-9]$ ]] && [ "$NCL" -le $((NGW + 1)) ] ||
	{ echo "campaign: --gateways 1..9, --clients 1..gateways+1" >&2; exit 2; }
[ -x "$GW" ] && [ -x "$FCLIENT" ] || { echo "campaign: build first ($GW, $FCLIENT)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "campaign: needs root (network namespaces, cgroups)" >&2; exit 77; }
OUT=${OUT:-$(mktemp -d /tmp/mapfs-campaign.XXXXXX)}
mkdir -p "$OUT"
RANDOM=$SEED
TOTAL_S=$(awk -v m="$MINUTES" 'BEGIN { printf "%d", m * 60 }')
CALM_S=$(awk -v t="$TOTAL_S" 'BEGIN { c = int(t / 4); print (c > 60 ? 60 : c) }')

now_ns() { date +%s%N; }
say() { echo "campaign: $*"; }
# between VAR LO HI: VAR gets a whole number drawn from the seed's
# sequence (in this shell: a $(...) would draw in a copy of it, and every
# draw would be the same)
between() { printf -v "$1" '%d' $(($2 + RANDOM % ($3 - $2 + 1))); }

# ---- the machines ----------------------------------------------------------

# One lab machine more than the gateways: the fresh gateway at the end.
cmd_up --gateways $((NGW + 1)) --gw-cpu 0.5 --client-cpu 0.4 --pg-cpu 0.5 --pgs-cpu 0.3 \
	--rtt none >"$OUT/lab.txt" 2>&1 || { cat "$OUT/lab.txt" >&2; exit 2; }
load
cleanup() {
	local rc=$? i
	# The gateways' logs stay with the run.
	for i in $(seq $((NGW + 1))); do
		cp "$LAB/disk/gw$i/run/err" "$OUT/gw$i.log" 2>/dev/null || true
	done
	if [ $KEEP = 1 ]; then
		say "the lab stays up (bench/lab.sh down)"
	else
		cmd_down >/dev/null 2>&1 || true
	fi
	exit $rc
}
trap cleanup EXIT
grep "LAB budgets" "$OUT/lab.txt"
say "seed=$SEED minutes=$MINUTES gateways=$NGW clients=$NCL faults=$KINDS out=$OUT"
say "not yet in this campaign: netem," \
	"radosgw (a shared file store instead), the kernel client, the lossy disk"

pg_up 1 >"$OUT/pg.txt" 2>&1 || { cat "$OUT/pg.txt" >&2; exit 2; }
pg_sql -c "CREATE DATABASE campaign" >/dev/null
# Both servers: after a failover the gateways find the new primary.
META="postgresql://mapfs@$(machine_ip pg):5432,$(machine_ip pgs):5432/campaign?target_session_attrs=read-write"
PRIMARY=pg STANDBY=pgs
CLUSTER_STORE=$LAB/store/campaign
mkdir -p "$CLUSTER_STORE"

# gw_run I: gateway I on its state (kept across restarts), in the cluster.
gw_run() {
	local i=$1 d=$LAB/disk/gw$1/run
	mkdir -p "$d/state"
	echo "/mapfs $NET.0/24(rw,no_root_squash,insecure)" >"$d/exports"
	: >"$d/out"
	lab_exec "gw$i" "$GW" --state "$d/state" --store "file://$CLUSTER_STORE" \
		--exports "$d/exports" --bind "$(machine_ip "gw$i")" --nfs-port 2049 \
		--mount-port 20048 --no-rpcbind --foreground --threads 2 --log-level ${CAMPAIGN_LOG_LEVEL:-info} \
		--upload-delay 2 --meta "$META" --node "n$i" >"$d/out" 2>>"$d/err" &
	for _ in $(seq 600); do grep -q ready "$d/out" 2>/dev/null && return 0; sleep 0.1; done
	tail -5 "$d/err" >&2
	say "gateway gw$i did not start"
	return 1
}

gw_pids() { cg_pids "gw$1"; }

for i in $(seq "$NGW"); do
	rm -rf "$LAB/disk/gw$i/run"
	gw_run "$i" || exit 2
done
URLS=()
for i in $(seq "$NGW"); do URLS+=("$(url_of "$i")"); done
lab_exec c1 "$FCLIENT" setup "${URLS[0]}" || { say "setup through gw1 failed"; exit 2; }

# ---- the clients -------------------------------------------------------------

CPIDS=()
for c in $(seq "$NCL"); do
	lab_exec "c$c" "$FCLIENT" run --client "$c" --seconds "$TOTAL_S" \
		--seed $((SEED * 100 + c)) --log "$OUT/client$c.log" "${URLS[@]}" \
		2>"$OUT/client$c.err" &
	CPIDS+=($!)
done
T_END=$(($(date +%s) + TOTAL_S))
say "calm for ${CALM_S}s, then faults until the clients stop (${TOTAL_S}s in all)"
sleep "$CALM_S"

# ---- the faults --------------------------------------------------------------

IFS=, read -r -a KIND_LIST <<<"$KINDS"
: >"$OUT/faults.log"
fault_log() { echo "$1 $(now_ns) $2 $3" >>"$OUT/faults.log"; }

# A route to nowhere both ways between machines a and b.
cut_link() {
	ip netns exec "$NSP$1" ip route add blackhole "$(machine_ip "$2")/32"
	ip netns exec "$NSP$2" ip route add blackhole "$(machine_ip "$1")/32"
}
mend_link() {
	ip netns exec "$NSP$1" ip route del blackhole "$(machine_ip "$2")/32" 2>/dev/null || true
	ip netns exec "$NSP$2" ip route del blackhole "$(machine_ip "$1")/32" 2>/dev/null || true
}

# psql on machine m's server (its socket).
pg_sql_on() {
	local m=$1
	shift
	PGOPTIONS="-c client_min_messages=warning" runuser -u "$(pg_user)" -- "$PGBIN/psql" -X -q -At \
		-h "$LAB/disk/$m/sock" -p 5432 -U mapfs -d postgres "$@"
}

# The primary killed -9 (with its backends), the synchronous standby
# promoted: every commit the gateways were answered for is on it.  After
# d seconds the old primary comes back as the new synchronous standby.
pg_failover() {
	pg_kill_promote || return 1
	sleep "$1"
	pg_rejoin
}

# The primary killed -9 (with its backends), the standby promoted; the
# old primary's pid in OLD_PID.
pg_kill_promote() {
	local kids
	OLD_PID=$(head -1 "$LAB/disk/$PRIMARY/data/postmaster.pid")
	kids=$(pgrep -P "$OLD_PID" || true)
	kill -9 "$OLD_PID" $kids 2>/dev/null || true
	pg_cmd "$STANDBY" "$PGBIN/pg_ctl" -D "$LAB/disk/$STANDBY/data" -w -t 60 promote >/dev/null ||
		{ say "the standby in $STANDBY was not promoted"; return 1; }
}

# The killed primary back as the new primary's synchronous standby.
pg_rejoin() {
	local old=$PRIMARY new=$STANDBY pid=$OLD_PID u st=
	u=$(pg_user)
	for _ in $(seq 50); do pgrep -P "$pid" >/dev/null || kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	rm -rf "$LAB/disk/$old/data" "$LAB/disk/$old/sock"
	mkdir -p "$LAB/disk/$old/sock"
	chown "$u" "$LAB/disk/$old" "$LAB/disk/$old/sock"
	pg_cmd "$old" "$PGBIN/pg_basebackup" -d "host=$(machine_ip "$new") port=5432 user=mapfs application_name=s1" \
		-D "$LAB/disk/$old/data" -R -X stream -c fast >"$OUT/basebackup.log" 2>&1 ||
		{ say "pg_basebackup into $old: $(tail -2 "$OUT/basebackup.log")"; return 1; }
	pg_cmd "$old" "$PGBIN/pg_ctl" -D "$LAB/disk/$old/data" -w -t 60 -l "$LAB/disk/$old/log" -o \
		"-p 5432 -k $LAB/disk/$old/sock -c listen_addresses=$(machine_ip "$old") -c max_connections=300 -c shared_buffers=128MB" \
		start >/dev/null || { say "the new standby in $old did not start"; return 1; }
	pg_sql_on "$new" -c "ALTER SYSTEM SET synchronous_standby_names = 's1'" -c "SELECT pg_reload_conf()" >/dev/null
	for _ in $(seq 300); do
		st=$(pg_sql_on "$new" -c "SELECT sync_state FROM pg_stat_replication WHERE application_name = 's1'" || true)
		[ "$st" = sync ] && break
		sleep 0.1
	done
	[ "$st" = sync ] || { say "the new standby in $old is not synchronous ($st)"; return 1; }
	PRIMARY=$new STANDBY=$old
}

one_fault() {
	local kind=$1 i t0 d p c n how
	between i 1 "$NGW"
	t0=$(now_ns)
	case $kind in
	kill9)
		for p in $(gw_pids "$i"); do kill -9 "$p" 2>/dev/null || true; done
		between d 0 10
		sleep "$d"
		gw_run "$i" || { say "gw$i did not come back after kill -9"; return 1; }
		fault_log "$t0" kill9 "gw$i"
		;;
	stop)
		between d 1 15
		for p in $(gw_pids "$i"); do kill -STOP "$p" 2>/dev/null || true; done
		sleep "$d"
		for p in $(gw_pids "$i"); do kill -CONT "$p" 2>/dev/null || true; done
		fault_log "$t0" stop "gw$i"
		;;
	part-pg)
		between d 5 30
		cut_link "gw$i" "$PRIMARY"
		sleep "$d"
		mend_link "gw$i" "$PRIMARY"
		fault_log "$t0" part-pg "gw$i"
		;;
	pg-failover)
		between d 0 10
		i=$PRIMARY
		pg_failover "$d" || return 1
		fault_log "$t0" pg-failover "$i"
		say "fault pg-failover: $STANDBY killed -9, $PRIMARY promoted, $STANDBY back as its standby after ${d}s"
		return 0
		;;
	syncrep-cut)
		# The standby cut off: every commit waits for it.  Then the
		# gateways' commits in that wait are cancelled or ended (what
		# an operator, a timeout or the gateway's own doubt does):
		# PostgreSQL keeps each on the primary, "not replicated".
		# Half the time the primary then dies and the standby, which
		# never got them, is promoted: no answered change may be gone.
		between d 3 15
		between p 0 1
		cut_link "$PRIMARY" "$STANDBY"
		sleep 1
		how=pg_cancel_backend
		[ $((RANDOM % 2)) = 0 ] || how=pg_terminate_backend
		# (materialized: the filter runs before the function; this
		# query's own text names mapfs_commit3 too)
		n=$(pg_sql_on "$PRIMARY" -c "WITH w AS MATERIALIZED (SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND query LIKE '%mapfs_commit3%' AND pid <> pg_backend_pid()) SELECT count(*) FROM w WHERE $how(pid)" || echo "?")
		sleep $((d - 1))
		i=$PRIMARY
		if [ "$p" = 1 ]; then
			pg_kill_promote || return 1
			mend_link "$i" "$STANDBY"
			pg_rejoin || return 1
			fault_log "$t0" syncrep-cut "$i-failover"
			say "fault syncrep-cut: $STANDBY cut off ${d}s, $n commits in their wait: $how, then $STANDBY killed -9 and $PRIMARY promoted"
		else
			mend_link "$i" "$STANDBY"
			fault_log "$t0" syncrep-cut "$i"
			say "fault syncrep-cut: $STANDBY cut off ${d}s, $n commits in their wait: $how"
		fi
		return 0
		;;
	part-client)
		between c 1 "$NCL"
		between d 5 30
		cut_link "c$c" "gw$i"
		sleep "$d"
		mend_link "c$c" "gw$i"
		fault_log "$t0" part-client "c$c-gw$i"
		;;
	*)
		say "no fault kind '$kind'"
		return 1
		;;
	esac
	say "fault $kind gw$i ${d}s"
}

while [ $(($(date +%s) + 12)) -lt "$T_END" ]; do
	kind=${KIND_LIST[$((RANDOM % ${#KIND_LIST[@]}))]}
	one_fault "$kind" || exit 2
	between pause 2 8
	sleep "$pause"
done

# ---- the heal and the final reads ------------------------------------------

for c in $(seq "$NCL"); do
	wait "${CPIDS[$((c - 1))]}" || { say "client c$c failed: $(tail -3 "$OUT/client$c.err")"; exit 2; }
done
for i in $(seq "$NGW"); do
	[ -n "$(gw_pids "$i")" ] || { say "gw$i died in the run: $(tail -3 "$LAB/disk/gw$i/run/err")"; exit 2; }
done
say "heal: every change uploaded"
# A gateway that cannot upload everything once all is mended (three
# flushes, each giving up after 30 s without progress) is a finding of
# the run (heal.txt, for the checker), not a failure of the campaign.
: >"$OUT/heal.txt"
for i in $(seq "$NGW"); do
	for try in 1 2 3; do
		"$GW" flush --state "$LAB/disk/gw$i/run/state" >"$OUT/flush.gw$i.txt" 2>&1 && break
		[ "$try" = 3 ] && echo "gw$i: flush after the heal: $(tail -1 "$OUT/flush.gw$i.txt")" >>"$OUT/heal.txt"
	done
done
# Settled: a name made through gw1 now, seen through every gateway, says
# each replica has applied what came before it (a gateway cut off until
# the end may take a while to find its connection to PostgreSQL again:
# the wait, or its failure, is said).
lab_exec c1 "$FCLIENT" touch "${URLS[0]}" /fc/settled || { say "touch through gw1 failed"; exit 2; }
for i in $(seq "$NGW"); do
	t0=$(date +%s%N)
	until lab_exec c1 "$FCLIENT" stat "$(url_of "$i")" /fc/settled; do
		if [ $(($(date +%s%N) - t0)) -gt 120000000000 ]; then
			echo "gw$i: its replica did not catch up within 120 s of the heal" >>"$OUT/heal.txt"
			break
		fi
		sleep 0.2
	done
	say "gw$i caught up in $((($(date +%s%N) - t0) / 1000000)) ms"
done
# The fresh gateway: empty state, same cluster and store.
F=$((NGW + 1))
rm -rf "$LAB/disk/gw$F/run"
gw_run "$F" || exit 2
for i in $(seq "$F"); do
	label=gw$i
	[ "$i" = "$F" ] && label=fresh
	set +e
	lab_exec c1 "$FCLIENT" walk "$(url_of "$i")" >"$OUT/walk.tmp" 2>"$OUT/walk.$label.err"
	rc=$?
	set -e
	{ echo "status $rc"; cat "$OUT/walk.tmp"; } >"$OUT/walk.$label.txt"
	set +e
	"$GW" fsck --state "$LAB/disk/gw$i/run/state" >"$OUT/fsck.tmp" 2>&1
	rc=$?
	set -e
	{ echo "status $rc"; cat "$OUT/fsck.tmp"; } >"$OUT/fsck.$label.txt"
done
rm -f "$OUT/walk.tmp" "$OUT/fsck.tmp"

set +e
python3 "$FAULTS_DIR/check.py" "$OUT" "$SEED" "$MINUTES" | tee "$OUT/check.txt"
rc=${PIPESTATUS[0]}
set -e
exit "$rc"
