# The guest of the kernel outage test (host/outage.sh): with the store
# up, make files the gateway caches and uploads; with it gone, list,
# read, write, append and remove through the kernel client: none of that
# may wait for the store.  A rename to a new name and a new file are
# names the gateway has not seen while its listing is stale: they may
# wait (JUKEBOX) until the store is back, and must then go through.
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
# New names: these may wait for the store (a JUKEBOX the client retries).
(mv "$D/old" "$D/renamed" && echo late > "$D/new" && echo "late ops done") > /tmp/late 2>&1 &
late=$!
sleep 2
echo "outage: phase 2 done"
wait $late
t late-ops   grep -q "late ops done" /tmp/late
echo "outage: the late ops finished $(( $(date +%s) - start )) s after the work in the outage began"
sync
(cd "$D" && for f in f1 f2 f3 sub/note renamed new; do
  echo "final $(sha256sum < $f | cut -d' ' -f1) o/$f"; done)
echo "gone o/gone"
echo "gone o/old"
summary
