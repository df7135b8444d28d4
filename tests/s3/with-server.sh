#!/usr/bin/env bash
# tests/s3/with-server.sh KIND CMD [ARGS...] - run CMD against a fresh S3
# server of KIND (rgw or s3rver) on 127.0.0.1, stopped and wiped afterwards
# whatever CMD does.  CMD sees the env that KIND.sh start prints, also as
# MAPFS_TEST_S3_ENDPOINT / _BUCKET / _AK / _SK (the unit tests' names).
# Exits with CMD's status, or 1 if the server cannot start.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -ge 2 ] || { echo "usage: with-server.sh rgw|s3rver CMD [ARGS...]" >&2; exit 2; }
kind=$1; shift
case $kind in rgw|s3rver) ;; *) echo "with-server.sh: unknown server '$kind'" >&2; exit 2 ;; esac
env_text=$(MAPFS_S3_WATCH_PID=$$ "$HERE/$kind.sh" start) || exit 1
set -a; eval "$env_text"; set +a
trap '"$HERE/$kind.sh" stop "$MAPFS_S3_DIR" >&2' EXIT
export MAPFS_TEST_S3_ENDPOINT=$MAPFS_S3_ENDPOINT MAPFS_TEST_S3_BUCKET=$MAPFS_S3_BUCKET \
	MAPFS_TEST_S3_AK=$AWS_ACCESS_KEY_ID MAPFS_TEST_S3_SK=$AWS_SECRET_ACCESS_KEY \
	AWS_EC2_METADATA_DISABLED=true NO_PROXY='*' no_proxy='*'
rc=0
"$@" || rc=$?
exit $rc
