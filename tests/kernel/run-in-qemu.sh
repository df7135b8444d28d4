#!/bin/bash
# run-in-qemu.sh GUEST_SCRIPT -- boot the Debian kernel in QEMU with a busybox
# initramfs, mount the gateway over NFSv3 WITH locking (lockd + NLM, no
# "nolock"), run GUEST_SCRIPT in the guest (cwd /mnt) and exit with its status.
#
# Meant to run inside the network namespace that kernel-test.sh makes: there
# the guest's 10.0.2.2 (QEMU's host address) is the namespace's 127.0.0.1, so
# the guest reaches the gateway and the namespace's rpcbind (port 111) on it.
# Two host ports are forwarded INTO the guest, for the gateway's callbacks:
#   127.0.0.1:$KT_CB_RPCBIND_PORT -> guest :111  (the guest's rpcbind/statd)
#   127.0.0.1:$KT_LOCKD_PORT      -> guest :$KT_LOCKD_PORT (its lockd, pinned)
# Forwarded connections reach the guest from 10.0.2.2, the address it mounted,
# which Linux's lockd insists on before it accepts a GRANTED callback.
#
# Environment: KT_NFS_PORT KT_MOUNT_PORT KT_EXPORT KT_CB_RPCBIND_PORT
# KT_LOCKD_PORT (all required), KT_CB_BIND (the address those two forwards
# listen on, default 127.0.0.1), KT_CB_PORTS (more ports forwarded so, as
# themselves: 111 for the guest's statd, which shares rpcbind's port),
# KT_FILES (dir of static binaries: /opt/bin),
# KT_TIMEOUT (s, default 170), KT_VERBOSE=1 (kernel console to stderr),
# KT_MOUNT_OPTS (extra mount options).
# Exit: the guest script's status; 120-122 guest setup failed (122: mount);
# 124 timeout; 125 the guest died without a status; 2 usage.
set -uo pipefail
[ $# -eq 1 ] && [ -r "$1" ] || { sed -n '2,24p' "$0" >&2; exit 2; }
for v in KT_NFS_PORT KT_MOUNT_PORT KT_EXPORT KT_CB_RPCBIND_PORT KT_LOCKD_PORT; do
  [ -n "${!v:-}" ] || { echo "run-in-qemu: $v is not set" >&2; exit 2; }
done
HERE="$(cd "$(dirname "$0")" && pwd)"
KVER="${KT_KVER:-$(ls /usr/lib/modules | sort -V | tail -1)}"
KERNEL="/boot/vmlinuz-$KVER" MODDIR="/usr/lib/modules/$KVER"
RUN=$(mktemp -d /tmp/mapfs-kernel-run.XXXXXX)
QPID=
cleanup() {
  [ -n "$QPID" ] && kill "$QPID" 2>/dev/null
  [ -n "${TPID:-}" ] && kill "$TPID" 2>/dev/null
  [ -n "${KT_KEEP:-}" ] && echo "run-in-qemu: kept $RUN" >&2 || rm -rf "$RUN"
}
trap cleanup EXIT

# ---- initramfs: busybox, the NFS client modules, our init and helpers ----
ROOT="$RUN/root"
mkdir -p "$ROOT"/{bin,sbin,proc,sys,dev,tmp,mnt,etc,lib/modules,opt/bin,run,var/run,kt}
cp /bin/busybox "$ROOT/bin/busybox"
ln -s busybox "$ROOT/bin/sh"
: > "$ROOT/etc/modules"
for m in failover net_failover virtio_ring virtio virtio_pci_legacy_dev \
         virtio_pci_modern_dev virtio_pci virtio_net sunrpc grace lockd netfs \
         fscache nfs_acl nfs nfsv3; do
  rel=$(awk -F: -v m="$m" '{ n=$1; sub(".*/","",n); sub(/\.ko(\.(xz|zst|gz))?$/,"",n);
        gsub("-","_",n); if (n==m) { print $1; exit } }' "$MODDIR/modules.dep")
  [ -n "$rel" ] || continue   # built in, or not in this kernel
  case "$MODDIR/$rel" in
    *.ko.xz)  xz -dc "$MODDIR/$rel" ;;
    *.ko.zst) zstd -dcq "$MODDIR/$rel" ;;
    *.ko.gz)  gzip -dc "$MODDIR/$rel" ;;
    *)        cat "$MODDIR/$rel" ;;
  esac > "$ROOT/lib/modules/$m.ko"
  echo "$m" >> "$ROOT/etc/modules"
done
echo "root:x:0:0:root:/root:/bin/sh" > "$ROOT/etc/passwd"
echo "root:x:0:" > "$ROOT/etc/group"
install -m 755 "$HERE/guest/init" "$ROOT/init"
install -m 755 "$1" "$ROOT/kt/script"
install -m 644 "$HERE/guest/lib.sh" "$ROOT/kt/lib.sh"
[ -n "${KT_FILES:-}" ] && cp -a "$KT_FILES/." "$ROOT/opt/bin/"
cat > "$ROOT/kt/env" <<ENV
NFS_PORT=$KT_NFS_PORT
MOUNT_PORT=$KT_MOUNT_PORT
EXPORT=$KT_EXPORT
LOCKD_PORT=$KT_LOCKD_PORT
MOUNT_OPTS=${KT_MOUNT_OPTS:-}
ENV
(cd "$ROOT" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 > "$RUN/initrd.gz"

# ---- boot: serial 0 = console, 1 = script output, 2 = exit status ----
: > "$RUN/console"; : > "$RUN/out"; : > "$RUN/rc"
NET="user,id=n0,ipv6=off,net=10.0.2.0/24,host=10.0.2.2"
CB=${KT_CB_BIND:-127.0.0.1}
NET="$NET,hostfwd=tcp:$CB:$KT_CB_RPCBIND_PORT-10.0.2.15:111"
NET="$NET,hostfwd=tcp:$CB:$KT_LOCKD_PORT-10.0.2.15:$KT_LOCKD_PORT"
for p in ${KT_CB_PORTS:-}; do
  NET="$NET,hostfwd=tcp:$CB:$p-10.0.2.15:$p"
done
qemu-system-x86_64 -accel tcg,thread=multi -cpu max -nodefaults -nographic \
  -no-reboot -m "${KT_MEM:-512}" -smp "${KT_SMP:-2}" \
  -kernel "$KERNEL" -initrd "$RUN/initrd.gz" \
  -append "console=ttyS0 loglevel=4 panic=-1 rdinit=/init" -monitor none \
  -serial "file:$RUN/console" -serial "file:$RUN/out" -serial "file:$RUN/rc" \
  -netdev "$NET" -device virtio-net-pci,netdev=n0,romfile= \
  > "$RUN/qemu.log" 2>&1 < /dev/null &
QPID=$!
tail -n +1 -f --pid=$QPID "$RUN/out" & TPID=$!
[ -n "${KT_VERBOSE:-}" ] && tail -n +1 -f --pid=$QPID "$RUN/console" >&2 &
deadline=$(( $(date +%s) + ${KT_TIMEOUT:-170} ))
timed_out=0
while kill -0 "$QPID" 2>/dev/null; do
  [ "$(date +%s)" -ge "$deadline" ] && { timed_out=1; kill "$QPID"; break; }
  sleep 0.5
done
wait "$QPID" 2>/dev/null; QPID=
sleep 0.3; kill "$TPID" 2>/dev/null; wait "$TPID" 2>/dev/null; TPID=
if [ $timed_out = 1 ]; then
  echo "run-in-qemu: timed out; console tail:" >&2; tail -30 "$RUN/console" >&2; exit 124
fi
RC=$(tr -dc '0-9' < "$RUN/rc")
if [ -z "$RC" ]; then
  echo "run-in-qemu: no status from the guest; console tail:" >&2
  tail -40 "$RUN/console" >&2; cat "$RUN/qemu.log" >&2; exit 125
fi
if [ "$RC" != 0 ]; then
  echo "---- guest console (tail) ----" >&2; tail -40 "$RUN/console" >&2
fi
exit "$RC"
