# Locks between two processes through NLM (mounted without nolock): flock
# (which Linux's NFS client turns into whole-file NLM locks) and fcntl.
. /kt/lib.sh
F=/mnt/lockfile
: > $F
t flock-exclusive-held  sh -c "flock -x $F -c 'echo held > /tmp/held; sleep 4' & while [ ! -e /tmp/held ]; do sleep 0.1; done; ! flock -n -x $F -c true"
t flock-shared-refused  sh -c "! flock -n -s $F -c true"
t flock-blocks-then-gets sh -c "t0=\$(date +%s); flock -x $F -c true; t1=\$(date +%s); echo waited \$((t1 - t0)) s; [ \$((t1 - t0)) -le 20 ]"
t flock-free-again      flock -n -x $F -c true
t flock-shared-shared   sh -c "rm -f /tmp/held; flock -s $F -c 'echo held > /tmp/held; sleep 3' & while [ ! -e /tmp/held ]; do sleep 0.1; done; flock -n -s $F -c true"
wait
t fcntl-two-processes   locktest /mnt/fcntl-file
cat /tmp/t.out
summary
