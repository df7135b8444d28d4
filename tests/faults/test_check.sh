#!/usr/bin/env bash
# tests/faults/test_check.sh - the campaign's checkers on histories made by
# hand: a history that keeps every rule passes (exit 0), and each kind of
# violation is found (exit 1, named), so that a campaign's "violations=0"
# means something.  No machines needed.
set -euo pipefail
CHECK=$(cd "$(dirname "$0")" && pwd)/check.py
T=$(mktemp -d /tmp/mapfs-check.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0

# a history: client 1, four calls (ns times); the walks agree with it
base() {
	rm -rf "$T/run"
	mkdir -p "$T/run"
	printf '%s\n' \
		$'100\t200\t1\t0\tcreate\tn0\t-\tok' \
		$'300\t400\t1\t1\trename\tn0\tr1\tok' \
		$'500\t600\t1\t0\tmanifest\tm2\t5:00000000000000aa\tok' \
		$'700\t800\t1\t0\tcreate\tn3\t-\tunknown' \
		$'900\t1000\t1\t0\twrite\tr0\tc1-4\tok' \
		$'1100\t1200\t1\t1\tread\tr0\tc1-4\tok' \
		$'1300\t1400\t1\t0\tremove\tr1\t-\tok' >"$T/run/client1.log"
	for w in gw1 fresh; do
		printf '%s\n' 'status 0' \
			$'/fc/c1\tdir\t0\t-\t-' \
			$'/fc/c1/m2\tfile\t5\t5:00000000000000aa\t-' \
			$'/fc/reg\tdir\t0\t-\t-' \
			$'/fc/reg/r0\tfile\t32\t32:0000000000000001\tc1-4' >"$T/run/walk.$w.txt"
	done
	printf 'status 0\nfsck: clean\n' >"$T/run/fsck.gw1.txt"
	echo "1000 2000 kill9 gw1" >"$T/run/faults.log"
}

# expect STATUS WORDS... -- the checker's exit status and words in its output
expect() {
	local want=$1 what=$2 out rc
	shift 2
	set +e
	out=$(python3 "$CHECK" "$T/run" 7 1 2>&1)
	rc=$?
	set -e
	if [ "$rc" != "$want" ]; then
		echo "FAIL $what: exit $rc, want $want"; echo "$out"; fail=1; return
	fi
	for w in "$@"; do
		grep -qF -- "$w" <<<"$out" || { echo "FAIL $what: no '$w' in"; echo "$out"; fail=1; return; }
	done
	echo "ok   $what"
}

base
expect 0 "a history that keeps the rules" "CAMPAIGN seed=7 minutes=1 ops=7 ok=6 unknown=1 faults=1 violations=0"

base
sed -i '/m2/d' "$T/run/walk.fresh.txt"
expect 1 "an acknowledged file missing through one gateway" "c1/m2 acknowledged and missing (walk fresh)" "violations=2"

base
sed -i 's/5:00000000000000aa\t-$/5:00000000000000bb\t-/' "$T/run/walk.gw1.txt"
expect 1 "a COMMITted file's bytes differ" "c1/m2 reads back 5:00000000000000bb"

base
printf '%s\n' $'/fc/c1/r1\tfile\t0\t0:1\t-' >>"$T/run/walk.gw1.txt"
printf '%s\n' $'/fc/c1/r1\tfile\t0\t0:1\t-' >>"$T/run/walk.fresh.txt"
expect 1 "a removed name back" "c1/r1 removed and back"

base
printf '%s\n' $'/fc/c1/x9\tfile\t0\t0:1\t-' >>"$T/run/walk.gw1.txt"
expect 1 "a name no call made; walks that differ" "c1/x9: no call made it" "walk gw1 differs from walk fresh"

base
printf '%s\n' $'1500\t1600\t1\t0\tremove\tm2\t-\tfail:2' >>"$T/run/client1.log"
expect 1 "NOENT for a name that is there" "remove of c1/m2 answered NOENT"

base
printf '%s\n' $'1500\t1600\t1\t1\tremove\tm2\t-\tfail:2' >>"$T/run/client1.log"
expect 0 "the same through another gateway inside the window: allowed" "1 NOENT of names made"

base
printf '%s\n' $'1500\t1600\t1\t0\tcreate\tq5\t-\tfail:17' >>"$T/run/client1.log"
expect 1 "EXIST for a name no call made" "create of c1/q5 answered EXIST"

base
printf '%s\n' $'1500\t1600\t1\t0\trename\tm2\tr6\tunknown' >>"$T/run/client1.log"
expect 0 "an unknown rename that happened" "violations=0"
printf '%s\n' $'/fc/c1/r6\tfile\t5\t5:00000000000000aa\t-' >>"$T/run/walk.gw1.txt"
printf '%s\n' $'/fc/c1/r6\tfile\t5\t5:00000000000000aa\t-' >>"$T/run/walk.fresh.txt"
expect 1 "an unknown rename that happened and did not" "unknown rename c1/m2 -> r6: both there"

base
printf '%s\n' $'1500\t1600\t2\t1\twrite\tr0\tc2-9\tok' \
	$'1700\t1800\t1\t1\tread\tr0\tc1-4\tok' >"$T/run/client2.log"
expect 1 "a read after a newer write's close, stale" "r0 read c1-4 after c2-9's close had returned"

base
printf '%s\n' $'1500\t1600\t2\t0\twrite\tr0\tc2-9\tok' \
	$'1700\t1800\t1\t1\tread\tr0\tc1-4\tok' >"$T/run/client2.log"
expect 0 "the same through another gateway inside the window: allowed" "violations=0" "1 reads of the value before"

base
printf '%s\n' $'2500\t2600\t2\t0\twrite\tr0\tc2-9\tok' \
	$'3000002700\t3000002800\t1\t1\tread\tr0\tc1-4\tok' >"$T/run/client2.log"
expect 1 "the same through another gateway past the window (no fault)" "r0 read c1-4 after c2-9's close"

base
printf '%s\n' $'1500\t1600\t2\t0\twrite\tr0\tc2-9\tunknown' \
	$'1700\t1800\t1\t1\tread\tr0\tc1-4\tok' >"$T/run/client2.log"
expect 0 "the same after an unknown write: allowed" "violations=0"

base
printf '%s\n' $'1500\t1600\t1\t1\tread\tr0\tc3-1\tok' >>"$T/run/client1.log"
expect 1 "a value never written" "r0 read c3-1, a value never written"

base
printf 'status 1\nmissing object fc/c1/m2: the object\n' >"$T/run/fsck.gw1.txt"
echo "gw1: flush after the heal: gave up" >"$T/run/heal.txt"
expect 1 "fsck's findings and a heal that did not finish" "fsck through gw1: status 1" "gw1: flush after the heal"

base
rm "$T/run/client1.log"
expect 2 "a run with no history is no pass" "CAMPAIGN could not be checked"

exit $fail
