#!/usr/bin/env bash
# bench/shell.sh - what a user waits for at a shell through the Linux NFS
# client (in QEMU, ../shared/realclient): untar a source tree, checksum
# every file, ls -lR, rm -rf; mapfs-gw with a sync export, mapfs-gw with
# an async export (exports(5), issue 47) and nfs-ganesha (FSAL_VFS),
# interleaved rounds on the same disk, one fresh server per run.
#
# usage: bench/shell.sh [ROUNDS]        (3; as root)
#   env: DIR (/mnt/jfs if mounted, else /var/tmp): where the servers keep
#        their data (a journaled ext4 is what a gateway's disk is);
#        TREE: a .tar to unpack (default: this repository's source,
#        git archive HEAD); GW (build/mapfs-gw); GWARGS: more options
#        for the gateways (e.g. "--dir-ttl 60": no listing of the store
#        during ls -lR)
# Prints a line per run and the medians:
#   SHELL server=mapfs-sync round=1 untar_s=.. sum_s=.. ls_s=.. rm_s=..
# Timings are the guest's (software emulation): compare servers side by
# side, never with other machines.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RC=$ROOT/../shared/realclient
ROUNDS=${1:-3}
GW=${GW:-$ROOT/build/mapfs-gw}
if [ -z "${DIR:-}" ]; then
	DIR=/var/tmp
	mountpoint -q /mnt/jfs && DIR=/mnt/jfs
fi
[ -x "$RC/boot-and-run.sh" ] || { echo "shell.sh: no $RC" >&2; exit 2; }
command -v ganesha.nfsd >/dev/null ||
	apt-get install -y -qq --no-install-recommends nfs-ganesha nfs-ganesha-vfs >/dev/null
W=$(mktemp -d "$DIR/mapfs-shell.XXXXXX")
GWPID=
cleanup() {
	[ -n "$GWPID" ] && kill "$GWPID" 2>/dev/null && wait "$GWPID" 2>/dev/null
	GDIR=$W/ganesha "$RC/ganesha-vfs.sh" stop >/dev/null 2>&1 || true
	rm -rf "$W"
}
trap cleanup EXIT

mkdir -p "$W/files"
if [ -n "${TREE:-}" ]; then
	cp "$TREE" "$W/files/tree.tar"
else
	git -C "$ROOT" archive --format=tar HEAD > "$W/files/tree.tar"
fi
nfiles=$(tar tf "$W/files/tree.tar" | grep -vc '/$')
cat > "$W/guest.sh" <<'EOF'
# ms by the guest's clock (/proc/uptime: busybox's date may lack %N)
t() { s=$(cut -d' ' -f1 /proc/uptime); "$@" >/dev/null 2>&1
	e=$(cut -d' ' -f1 /proc/uptime); awk -v s="$s" -v e="$e" 'BEGIN { printf "%d", (e - s) * 1000 }'; }
mkdir -p /mnt/w && cd /mnt/w
u=$(t tar xf /realclient/files/tree.tar)
c=$(t sh -c 'find . -type f | xargs md5sum')
l=$(t ls -lR .)
cd /mnt
r=$(t rm -rf /mnt/w)
echo "RESULT $u $c $l $r"
EOF

run_one() { # SERVER NFS_PORT MOUNT_PORT EXPORT
	local out
	out=$(REALCLIENT_FILES=$W/files REALCLIENT_TIMEOUT=900 \
		"$RC/boot-and-run.sh" "$2" "$3" "$4" "$W/guest.sh" 2>&1) ||
		{ echo "$out" | tail -5 >&2; echo "shell.sh: $1 failed" >&2; exit 1; }
	echo "$out" | sed -n 's/^RESULT //p' | tail -1
}

mapfs() { # ROUND async|sync
	local st=$W/mapfs-$2-$1 exp=()
	mkdir -p "$st"
	if [ "$2" = async ]; then
		echo "/mapfs 127.0.0.1(rw,no_root_squash,insecure,async)" > "$st.exports"
	else
		echo "/mapfs 127.0.0.1(rw,no_root_squash,insecure)" > "$st.exports"
	fi
	"$GW" --state "$st" --store "file://$st/store" --exports "$st.exports" \
		--bind 127.0.0.1 --nfs-port 0 --mount-port 0 --no-rpcbind \
		--foreground --log-level warn --threads 2 ${GWARGS:-} > "$st.out" 2> "$st.err" &
	GWPID=$!
	for _ in $(seq 100); do grep -q ready "$st.out" && break; sleep 0.1; done
	local np mp
	np=$(sed -n 's/.*nfs=[^ ]*:\([0-9]*\) .*/\1/p' "$st.out")
	mp=$(sed -n 's/.*mount=[^ ]*:\([0-9]*\) .*/\1/p' "$st.out")
	run_one "mapfs-$2" "$np" "$mp" /mapfs
	kill "$GWPID"; wait "$GWPID" 2>/dev/null || true; GWPID=
}

ganesha() { # ROUND
	local g=$W/ganesha
	GDIR=$g NFS_PORT=32049 MNT_PORT=32048 "$RC/ganesha-vfs.sh" start >/dev/null
	run_one ganesha 32049 32048 "$g/export"
	GDIR=$g "$RC/ganesha-vfs.sh" stop >/dev/null
	rm -rf "$g"
}

echo "shell.sh: $nfiles files (a $(du -h "$W/files/tree.tar" | cut -f1) tar), $ROUNDS rounds, servers' data under $DIR"
declare -A all
for r in $(seq "$ROUNDS"); do
	order=(sync async ganesha)
	[ $((r % 2)) = 0 ] && order=(ganesha async sync)
	for s in "${order[@]}"; do
		case $s in
		ganesha) res=$(ganesha "$r"); name=ganesha ;;
		*) res=$(mapfs "$r" "$s"); name=mapfs-$s ;;
		esac
		read -r u c l m <<<"$res"
		echo "SHELL server=$name round=$r untar_s=$(awk -v v="$u" 'BEGIN{printf "%.2f", v/1000}') sum_s=$(awk -v v="$c" 'BEGIN{printf "%.2f", v/1000}') ls_s=$(awk -v v="$l" 'BEGIN{printf "%.2f", v/1000}') rm_s=$(awk -v v="$m" 'BEGIN{printf "%.2f", v/1000}')"
		all[$name]+="$u $c $l $m;"
	done
done
for name in mapfs-sync mapfs-async ganesha; do
	echo "${all[$name]}" | tr ';' '\n' | awk -v n="$name" 'NF == 4 {
		for (i = 1; i <= 4; i++) v[i, ++k[i]] = $i }
		function med(i,   a, j, m, t) { m = k[i]; for (j = 1; j <= m; j++) a[j] = v[i, j]
			for (j = 1; j <= m; j++) for (t = j + 1; t <= m; t++) if (a[t] < a[j]) { x = a[j]; a[j] = a[t]; a[t] = x }
			return a[int((m + 1) / 2)] / 1000 }
		END { printf "SHELL server=%s median untar_s=%.2f sum_s=%.2f ls_s=%.2f rm_s=%.2f\n", n, med(1), med(2), med(3), med(4) }'
done
