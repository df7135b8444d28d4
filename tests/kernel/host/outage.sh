# Host side of the kernel outage test (issues 17, 34), sourced by
# kernel-test.sh: the gateway's store is an s3rver in this network
# namespace, which goes away for a minute while the guest
# (guest/outage.sh) lists, reads, writes, removes and makes new names,
# and comes back once the guest says its work during the outage is done.  Then every object must be what the
# guest's kernel saw.
S3SH="$HERE/../s3/s3rver.sh"

host_setup() {
  command -v node >/dev/null || skip "node not installed (./dev installs it)"
  [ -f "$HERE/../s3/node_modules/s3rver/bin/s3rver.js" ] ||
    skip "s3rver not installed (tests/s3/install-deps.sh)"
  # s3rver stops with this test, whatever happens to it.
  export MAPFS_S3_WATCH_PID=$$ MAPFS_S3_QUIET=1
  "$S3SH" start "$RUN/s3" > "$RUN/s3.env" ||
    { echo "outage: s3rver did not start" >&2; return 1; }
  set -a; . "$RUN/s3.env"; set +a
  STORE_ARGS=(--store "s3://$MAPFS_S3_BUCKET" --s3-endpoint "$MAPFS_S3_ENDPOINT")
  GW_ARGS=(--dir-ttl 2)
}

# s3rver's watchdog stops it once this test's shell is gone, but only
# while its dir exists: cleanup removes $RUN, so stop it here first (it
# was left running after every run before).
host_cleanup() {
  "$S3SH" stop "$RUN/s3" >/dev/null 2>&1 || true
}

# Wait (up to $2 s) for a line of the guest's output matching $1.
guest_said() {
  local i
  for i in $(seq $(($2 * 10))); do
    grep -q "$1" "$GUEST_OUT" 2>/dev/null && return 0
    kill -0 $QPID 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

host_drive() {
  guest_said "^outage: phase 1 done" 150 ||
    { echo "outage: the guest never finished phase 1" >&2; return 1; }
  "$GW" ctl --state "$RUN/state" flush >/dev/null ||
    { echo "outage: flush before the outage failed" >&2; return 1; }
  "$S3SH" kill "$RUN/s3" || return 1
  local down_at=$(date +%s)
  echo "outage: the store is down ($(date +%T))"
  guest_said "^outage: phase 2 done" 150 ||
    { echo "outage: the guest never finished phase 2" >&2; return 1; }
  grep -q "not answering" "$RUN/gw.log" ||
    { echo "outage: the gateway never saw the store down" >&2; return 1; }
  # Away for a minute, as the users were.
  while [ $(( $(date +%s) - down_at )) -lt 60 ]; do sleep 1; done
  "$S3SH" start "$RUN/s3" > /dev/null || return 1
  echo "outage: the store is back ($(date +%T))"
}

host_check() {
  local line sum name got
  "$GW" ctl --state "$RUN/state" flush >/dev/null ||
    { echo "outage: flush after the outage failed" >&2; return 1; }
  grep -q "the store is back: replaying" "$RUN/gw.log" ||
    { echo "outage: the gateway did not log the replay" >&2; return 1; }
  # The names made meanwhile, counted (issue 34): new, copy, .f3.swp,
  # renamed, a, b, c, file, new.hard, tree, one, sub, two.
  local names
  names=$(sed -n 's/.*replaying .*; \([0-9]*\) names were made meanwhile.*/\1/p' \
    "$RUN/gw.log" | tail -1)
  [ "${names:-0}" -ge 13 ] ||
    { echo "outage: the log counts ${names:-no} names made in the outage, want 13 or more" >&2; return 1; }
  "$GW" ctl --state "$RUN/state" status | grep "last_outage" ||
    { echo "outage: ctl status does not show the last outage" >&2; return 1; }
  # guest: "final SHA256 NAME" for every file it left, "gone NAME" for
  # every one it removed or renamed away.
  grep -q "^final " "$GUEST_OUT" || { echo "outage: no final sums" >&2; return 1; }
  while read -r line sum name; do
    got=$(s3_get "$name" | sha256sum | cut -d' ' -f1)
    [ "$got" = "$sum" ] || { echo "outage: object $name is not what the client wrote" >&2; return 1; }
  done < <(grep "^final " "$GUEST_OUT")
  while read -r line name; do
    got=$(s3_code "$name")
    [ "$got" = 404 ] || { echo "outage: object $name is still there (HTTP $got)" >&2; return 1; }
  done < <(grep "^gone " "$GUEST_OUT")
  echo "outage: the bucket holds what the client wrote"
}

# curl, signed for s3rver's key, on object $1 of the bucket.
s3_req() {
  local key=$1; shift
  curl -s --noproxy '*' -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
    --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$@" \
    "$MAPFS_S3_ENDPOINT/$MAPFS_S3_BUCKET/$key"
}
s3_get() { s3_req "$1"; }
s3_code() { s3_req "$1" -o /dev/null -w '%{http_code}'; }
