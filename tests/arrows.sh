#!/usr/bin/env bash
# tests/arrows.sh [ROOT] - the rooms' arrows hold: every #include "ROOM/..."
# in a room's sources names the room itself or one it may use, as the
# block after "arrows:" in docs/ARCHITECTURE.md says (written once, there),
# and a room's private header (ROOM/*_int.h) is included only inside
# ROOM, and every room's library (CMakeLists.txt) links only rooms it
# may use.  Every directory with C sources must be a room of that block.
# Prints each wrong arrow; exit 1 if there is one.
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
DOC=$ROOT/docs/ARCHITECTURE.md
# The block: the first fenced block after the line with "arrows:".
declare -A may
while read -r room arrow rest; do
	[ "$arrow" = "->" ] || { echo "arrows.sh: bad line in $DOC: $room $arrow $rest" >&2; exit 2; }
	may[$room]=" $rest "
done < <(awk '/arrows:/ { f = 1; next }
	f == 1 && /^```/ { f = 2; next }
	f == 2 && /^```/ { exit }
	f == 2 && NF { print }' "$DOC")
[ ${#may[@]} -gt 0 ] || { echo "arrows.sh: no arrows block in $DOC" >&2; exit 2; }
bad=0
for dir in "$ROOT"/*/; do
	room=$(basename "$dir")
	case $room in tests|build*|etc|docs|cmake|var) continue ;; esac
	ls "$dir"*.c "$dir"*.h >/dev/null 2>&1 || continue
	if [ -z "${may[$room]+x}" ]; then
		echo "arrows: $room/ has C sources but is no room of $DOC"; bad=1; continue
	fi
	while IFS=: read -r file line inc; do
		to=${inc%%/*}
		if [ "$to" != "$room" ] && [[ "${may[$room]}" != *" $to "* ]]; then
			echo "arrows: ${file#$ROOT/}:$line: $room -> $to ($inc) is not an arrow of $DOC"; bad=1
		elif [ "$to" != "$room" ] && [[ $inc == *_int.h ]]; then
			echo "arrows: ${file#$ROOT/}:$line: $inc is $to's own"; bad=1
		fi
	done < <(grep -Hno '^#include "[a-z0-9_]*/[^"]*"' "$dir"*.c "$dir"*.h 2>/dev/null |
		sed 's/#include "\(.*\)"$/\1/')
done
# The libraries: a room's mapfs_room(...) in CMakeLists.txt links only
# rooms it may use (its XDR library and the metrics endpoint count as
# nfsd/, nlm/ and metrics/), so the link rules say what the arrows say.
lib_room() {
	case $1 in
	mapfs_xdr) echo nfsd ;;
	mapfs_nlm_xdr) echo nlm ;;
	mapfs_metrics_httpd) echo metrics ;;
	mapfs_*) echo "${1#mapfs_}" ;;
	esac
}
while read -r lib deps; do
	room=$(lib_room "$lib")
	[ -n "${may[$room]+x}" ] || continue
	for d in $deps; do
		[[ $d == mapfs_* ]] || continue
		to=$(lib_room "$d")
		if [ "$to" != "$room" ] && [[ "${may[$room]}" != *" $to "* ]]; then
			echo "arrows: CMakeLists.txt: $lib links $d: $room -> $to is not an arrow of $DOC"; bad=1
		fi
	done
done < <(tr '\n' ' ' < "$ROOT/CMakeLists.txt" |
	grep -o 'mapfs_room([^)]*)' |
	sed -E 's/^mapfs_room\(([a-z0-9_]+) .*DEPS ([^)]*)\)$/\1 \2/; t; s/^mapfs_room\(([a-z0-9_]+) .*/\1/')
# Inside cache/: X.c includes Y_int.h (its room's own, by bare name) only
# for a layer Y before X in the block after "cache layers:".
layers=$(awk '/cache layers:/ { f = 1; next }
	f == 1 && /^```/ { f = 2; next }
	f == 2 && /^```/ { exit }
	f == 2 && NF { print }' "$DOC")
[ -n "$layers" ] || { echo "arrows.sh: no cache layers block in $DOC" >&2; exit 2; }
rank() {
	local i=0 l
	for l in $layers; do
		[ "$l" = "$1" ] && { echo $i; return; }
		i=$((i + 1))
	done
	echo -1
}
for f in "$ROOT"/cache/*.c; do
	x=$(basename "$f" .c)
	rx=$(rank "$x")
	if [ "$rx" -lt 0 ]; then
		echo "arrows: cache/$x.c is no layer of $DOC"; bad=1; continue
	fi
	while IFS=: read -r line y; do
		[ "$y" = cache ] || [ "$y" = "$x" ] && continue
		ry=$(rank "$y")
		if [ "$ry" -lt 0 ] || [ "$ry" -ge "$rx" ]; then
			echo "arrows: cache/$x.c:$line: includes cache/${y}_int.h, a layer not below $x in $DOC"; bad=1
		fi
	done < <(grep -no '^#include "[a-z0-9_]*_int.h"' "$f" | sed 's|:#include "\(.*\)_int.h"|:\1|')
done
# Inside db/, nlm/ and fs/: a file calls no function that a file after
# it in the block after "ROOM layers:" defines (tests/layer_calls.py; a
# knot "( A B )" is one layer), and every file of the room is in the
# block.
for room in db nlm fs; do
	rl=$(awk -v want="$room layers:" 'index($0, want) { f = 1; next }
		f == 1 && /^```/ { f = 2; next }
		f == 2 && /^```/ { exit }
		f == 2 && NF { print }' "$DOC")
	[ -n "$rl" ] || { echo "arrows.sh: no $room layers block in $DOC" >&2; exit 2; }
	for f in "$ROOT/$room"/*.c; do
		x=$(basename "$f" .c)
		[[ " $(echo $rl) " == *" $x "* ]] || { echo "arrows: $room/$x.c is no layer of $DOC"; bad=1; }
	done
	python3 "$ROOT/tests/layer_calls.py" "$ROOT/$room" "$(echo $rl)" || bad=1
done
[ $bad = 0 ] && echo "arrows: every include and every library link follows the rooms' arrows; cache/ (by includes), db/, nlm/ and fs/ (by calls) their layers"
exit $bad

