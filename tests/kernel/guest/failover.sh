# The guest of tests/failover/failover-test.sh: hold an NLM lock and append
# + fsync one line at a time while the host kills the gateway behind the
# mounted address.  Every line fsync returned for must read back, and the
# lock must be this client's throughout (its lockd reclaims it when the
# survivor's SM_NOTIFY arrives).
. /kt/lib.sh
N=80
: > /mnt/lockfile
flock -x /mnt/lockfile -c 'echo held > /tmp/held; while [ ! -e /tmp/release ]; do sleep 0.2; done' &
while [ ! -e /tmp/held ]; do sleep 0.1; done
echo "failover: lock held"
appendsync /mnt/log $N /tmp/progress
rc=$?
echo "failover: appendsync exit $rc"
# The survivor tells this host to reclaim once the dead gateway's lease
# ran out: wait for that before letting the lock go.
i=0
while ! grep -q "lockd told" /tmp/statd.log && [ $i -lt 200 ]; do
  sleep 0.1; i=$((i+1))
done
sleep 1 # lockd's reclaimer runs after the notify
touch /tmp/release
wait
t lock-free-after flock -n -x /mnt/lockfile -c true
echo "---- statd ----"
cat /tmp/statd.log
[ $rc = 0 ] && summary
