#!/usr/bin/env bash
# tests/s3/install-deps.sh - what the S3 tests need, installed when missing,
# silent when everything is there (./dev and CI call it on every run):
#   - Ceph radosgw and a one-node cluster's daemons (tests/s3/rgw.sh);
#   - curl, whose --aws-sigv4 the interop tests use to read and write the
#     bucket behind the gateway's back;
#   - s3rver, pinned by tests/s3/package.json + package-lock.json, into
#     tests/s3/node_modules (ignored by git), and Node.js for it.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PKGS=(ceph-mon ceph-osd radosgw ceph-common curl iproute2)
WANT_S3RVER=$(sed -n 's/.*"s3rver": *"\([^"]*\)".*/\1/p' "$HERE/package.json")

sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
# Any Node.js from 17 on (Debian 12 has 18; a newer one may be there already).
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
	echo "tests/s3/install-deps.sh: installing ${missing[*]}"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
		--no-install-recommends "${missing[@]}" >/dev/null
fi

have=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' \
	"$HERE/node_modules/s3rver/package.json" 2>/dev/null | head -n1 || true)
if [ "$have" != "$WANT_S3RVER" ]; then
	echo "tests/s3/install-deps.sh: npm ci s3rver@$WANT_S3RVER into tests/s3/node_modules"
	(cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
