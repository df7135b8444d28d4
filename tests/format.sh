#!/usr/bin/env bash
# tests/format.sh [ROOT] - the house style holds: every tracked .c and .h
# file is as clang-format makes it with ROOT/.clang-format.  Prints the
# files that differ (and how to fix them); exit 1 if one does, 77 (a
# skip) where clang-format is not installed.
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$ROOT"
command -v clang-format >/dev/null || {
	echo "format: clang-format not installed (apt-get install clang-format): skipped"
	exit 77
}
if [ -d .git ] || git rev-parse --git-dir >/dev/null 2>&1; then
	mapfile -t files < <(git ls-files '*.c' '*.h')
else
	mapfile -t files < <(find . -path './build*' -prune -o \( -name '*.c' -o -name '*.h' \) -print)
fi
bad=()
for f in "${files[@]}"; do
	clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
	printf 'format: not in the house style: %s\n' "${bad[@]}"
	echo "format: fix with: clang-format -i ${bad[*]}"
	exit 1
fi
echo "format: ${#files[@]} files in the house style ($(clang-format --version | head -1))"
