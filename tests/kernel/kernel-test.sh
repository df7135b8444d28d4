#!/bin/bash
# kernel-test.sh NAME MAPFS_GW -- one kernel-client test: a gateway, a real
# Linux NFSv3 client in QEMU with locking on, and guest/NAME.sh run in it.
#
# Everything runs in a private network namespace (unshare -rn), so the
# fixed ports below are ours whatever else runs on the machine: port 111 is
# a minirpcbind that the gateway registers NLM/NSM with and the guest's
# lockd asks; the gateway's callbacks reach the guest's rpcbind and lockd
# through ports QEMU forwards (see run-in-qemu.sh).
#
# A test may have a host side, host/NAME.sh, sourced here: its host_setup
# runs before the gateway starts (it may set STORE_ARGS and GW_ARGS),
# host_drive while the guest runs (QPID is QEMU's runner, GUEST_OUT its
# output so far), host_check once the guest is done, and host_cleanup
# (if it has one) at the end, whatever happened, before $RUN goes.
#
# When something needed is missing (qemu-system-x86_64, a kernel with NFS
# modules, static busybox, a C compiler with a static libc, unprivileged
# user namespaces, or what host_setup needs) it prints "SKIPPED: ..." and
# exits 0.
set -uo pipefail
NAME=${1:?test name} GW=${2:?mapfs-gw binary}
HERE="$(cd "$(dirname "$0")" && pwd)"
skip() { echo "SKIPPED: kernel test $NAME: $*"; exit 0; }

if [ -z "${KT_IN_NETNS:-}" ]; then
  command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed (apt-get install qemu-system-x86)"
  KVER=$(ls /usr/lib/modules 2>/dev/null | sort -V | tail -1)
  [ -n "$KVER" ] && [ -r "/boot/vmlinuz-$KVER" ] || skip "no kernel in /boot (apt-get install linux-image-amd64)"
  grep -q '/nfsv3.ko' "/usr/lib/modules/$KVER/modules.dep" 2>/dev/null || skip "kernel $KVER has no nfsv3 module"
  [ -x /bin/busybox ] && file -L /bin/busybox 2>/dev/null | grep -q 'statically linked' || skip "no static /bin/busybox (apt-get install busybox-static)"
  command -v cpio >/dev/null || skip "cpio not installed"
  echo 'int main(void){return 0;}' | ${CC:-cc} -static -x c -o /dev/null - 2>/dev/null || skip "no C compiler with a static libc"
  unshare -rn true 2>/dev/null || skip "unprivileged network namespaces are not allowed here (unshare -rn)"
  [ -x "$GW" ] || { echo "kernel-test: $GW is not executable" >&2; exit 2; }
  exec env KT_IN_NETNS=1 unshare -rn "$0" "$@"
fi

RUN=$(mktemp -d /tmp/mapfs-kernel-$NAME.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  # What the host side started outside PIDS (before $RUN goes).
  ! declare -F host_cleanup >/dev/null || host_cleanup
  [ -n "${KT_KEEP:-}" ] && echo "kernel-test: kept $RUN" >&2 || rm -rf "$RUN"
}
trap cleanup EXIT
ip link set lo up

mkdir -p "$RUN/bin"
for h in minirpcbind locktest fsx flock fsop; do
  ${CC:-cc} -static -O2 -Wall -Wextra -o "$RUN/bin/$h" "$HERE/helpers/$h.c" ||
    { echo "kernel-test: building $h failed" >&2; exit 1; }
done

"$RUN/bin/minirpcbind" -p 111 -r "$RUN/rpcbind.ready" & PIDS+=($!)
for _ in $(seq 50); do [ -e "$RUN/rpcbind.ready" ] && break; sleep 0.1; done
[ -e "$RUN/rpcbind.ready" ] || { echo "kernel-test: minirpcbind did not start" >&2; exit 1; }

export KT_NFS_PORT=2049 KT_MOUNT_PORT=20048 KT_EXPORT=/mapfs
export KT_CB_RPCBIND_PORT=1111 KT_LOCKD_PORT=4045 KT_FILES="$RUN/bin"
STORE_ARGS=(--store "file://$RUN/store") GW_ARGS=()
HOOK="$HERE/host/$NAME.sh"
if [ -f "$HOOK" ]; then
  . "$HOOK"
  host_setup || { echo "kernel-test: host_setup of $NAME failed" >&2; exit 1; }
fi
mkfifo "$RUN/ready"
"$GW" "${STORE_ARGS[@]}" "${GW_ARGS[@]}" --state "$RUN/state" --bind 127.0.0.1 \
  --nfs-port $KT_NFS_PORT --mount-port $KT_MOUNT_PORT --nlm-port 4001 \
  --export $KT_EXPORT --grace 0 --nlm-client-rpcbind-port $KT_CB_RPCBIND_PORT \
  --upload-delay 1 --threads 2 --foreground --log-level "${KT_LOG_LEVEL:-info}" \
  > "$RUN/ready" 2> "$RUN/gw.log" & GWPID=$!; PIDS+=($GWPID)
read -r -t 30 line < "$RUN/ready"
case "$line" in
  "mapfs-gw: ready"*) ;;
  *) echo "kernel-test: the gateway did not start: '$line'" >&2; cat "$RUN/gw.log" >&2; exit 1 ;;
esac

if [ -f "$HOOK" ]; then
  GUEST_OUT="$RUN/guest.out"
  "$HERE/run-in-qemu.sh" "$HERE/guest/$NAME.sh" > "$GUEST_OUT" 2>&1 &
  QPID=$!; PIDS+=($QPID)
  host_drive; drc=$?
  wait $QPID; rc=$?
  cat "$GUEST_OUT"
  [ $drc = 0 ] || rc=1
  [ $rc != 0 ] || host_check || rc=1
else
  "$HERE/run-in-qemu.sh" "$HERE/guest/$NAME.sh"
  rc=$?
fi
kill -TERM $GWPID; wait $GWPID; gwrc=$?
if [ $rc != 0 ] || [ $gwrc != 0 ] || [ -n "${KT_VERBOSE:-}" ]; then
  echo "---- gateway log (tail; exit $gwrc) ----" >&2; tail -40 "$RUN/gw.log" >&2
fi
[ $gwrc = 0 ] || { echo "kernel-test: the gateway exited with $gwrc" >&2; exit 1; }
exit $rc
