#!/usr/bin/env bash
# bench/promotions.sh - the standby promoted mid-commit, again and again
# (issue 32, item 3): a PostgreSQL primary with a synchronous standby, one
# gateway on both (target_session_attrs=read-write), a client creating
# (GUARDED), renaming and removing one file after the other.  N times
# (default 100): kill the primary (-m immediate) 0.3-0.8 s into the load,
# promote the standby, bring the old primary back as the new standby.
# Then: zero wrong answers (no EXIST or NOENT for the client's own earlier
# success) and the directory holds exactly what the client was told.
#
#   bench/promotions.sh [N]
#
# It is test_e2e_cluster's "the standby promoted mid-commit, again" (CI
# runs it with 3) with more promotions: about 2 s each here.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
N=${1:-100}
case $N in -h | --help) sed -n '2,14p' "$0"; exit 0 ;; esac
T=$ROOT/build/tests/test_e2e_cluster
[ -x "$T" ] && [ -x "$ROOT/build/mapfs-gw" ] || { echo "promotions.sh: build first" >&2; exit 1; }
cd "$ROOT/build/tests"
MAPFS_GW=$ROOT/build/mapfs-gw MAPFS_E2E_STORE=file MAPFS_S3_SCRIPTS=$ROOT/tests/s3 \
	E2E_ONLY="promoted mid-commit" MAPFS_E2E_PROMOTIONS=$N "$T" 2>&1 |
	grep -E '^\s*\[|passed|FAILED|failed|wrong|lost|Test:|asserts'
