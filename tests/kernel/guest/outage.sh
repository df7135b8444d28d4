# The guest of the kernel outage test (host/outage.sh): with the store
# up, make files the gateway caches and uploads; with it gone, list,
# read, write, append and remove through the kernel client, and make new
# names the ordinary ways (a shell redirect, cp, an editor's save, mv,
# mkdir -p, ln, tar x): none of that may wait for the store, each
# command finishes within 2 s (issue 34).
. /kt/lib.sh
D=/mnt/o
rm -rf "$D"; mkdir -p "$D/sub"
for i in 1 2 3; do head -c $((i * 300000)) /dev/urandom > "$D/f$i"; done
echo hello > "$D/sub/note"
head -c 100000 /dev/urandom > "$D/gone"
head -c 100000 /dev/urandom > "$D/old"
sync
(cd "$D" && sha256sum f1 f3 > /tmp/sums)
# (without the "total" lines: blocks in use change once data is uploaded)
ls -lR "$D" | grep -v '^total' > /tmp/ls1
# A small tree to untar during the outage.
mkdir -p /tmp/tree/sub && echo one > /tmp/tree/one && echo two > /tmp/tree/sub/two
tar cf /tmp/tree.tar -C /tmp tree
echo "outage: phase 1 done"
# The host flushes, then stops the store; the listings' TTL (2 s) runs
# out meanwhile.
sleep 12
echo 3 > /proc/sys/vm/drop_caches   # the client must ask the gateway again
start=$(date +%s)
t ls-lR      sh -c "ls -lR $D | grep -v '^total' > /tmp/ls2 && diff /tmp/ls1 /tmp/ls2"
t cat-cached sh -c "cd $D && sha256sum -c /tmp/sums"
t append     sh -c "echo more >> $D/sub/note && sync"
t overwrite  sh -c "dd if=/dev/urandom of=$D/f2 bs=4096 count=10 conv=notrunc 2>/dev/null && sync"
t remove     rm "$D/gone"
t mkdir      mkdir "$D/made-down"
took=$(( $(date +%s) - start ))
echo "outage: the work during the outage took ${took} s"
t no-wait    [ "$took" -lt 30 ]
# New names, the ordinary ways: the client LOOKUPs each first, and the
# gateway answers from its last listing (issue 34).  Each within 2 s.
ms() { read u _ < /proc/uptime; echo $(( ${u%.*}${u#*.} * 10 )); }
q() {
  n=$1; shift
  s=$(ms); t "$n" "$@"; e=$(( $(ms) - s ))
  echo "outage: $n took $e ms"
  t "$n-within-2s" [ "$e" -le 2000 ]
}
q echo-new   sh -c "echo made while away > $D/new"
q cp-new     cp "$D/f1" "$D/copy"
q editor-save sh -c "echo edited > $D/.f3.swp && sync && mv $D/.f3.swp $D/f3"
q mv-new     mv "$D/old" "$D/renamed"
q mkdir-p    sh -c "mkdir -p $D/a/b/c && echo deep > $D/a/b/c/file"
q ln-new     ln "$D/new" "$D/new.hard"
q tar-x      tar xf /tmp/tree.tar -C "$D"
echo "outage: the work during the outage took $(( $(date +%s) - start )) s"
echo "outage: phase 2 done"
# The host brings the store back once it has been away 60 s, then
# compares the bucket with these sums (read from the gateway's cache).
sync
(cd "$D" && for f in f1 f2 f3 sub/note new copy renamed a/b/c/file new.hard \
    tree/one tree/sub/two; do
  echo "final $(sha256sum < $f | cut -d' ' -f1) o/$f"; done)
echo "gone o/gone"
echo "gone o/old"
echo "gone o/.f3.swp"
summary
