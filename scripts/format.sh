#!/usr/bin/env bash
# clang-format-14 over every tracked *.cpp and *.hpp, with the repository's .clang-format.
#   scripts/format.sh --check   lists each file that is not formatted and fails (what .ci/run runs)
#   scripts/format.sh           formats them in place
# Works on a fresh Debian 12 as root.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-fix}"
case "$mode" in
  --check | fix) ;;
  *) echo "usage: scripts/format.sh [--check]" >&2; exit 2 ;;
esac
source scripts/deps.sh
# Only the formatter (and git, for the list of files): nothing is built here.
tollgate_packages=(clang-format-14 git)
install_deps
mapfile -t files < <(git ls-files -- '*.cpp' '*.hpp')
if [ "$mode" = --check ]; then
  # --dry-run -Werror: a file that would change is an error, with the first lines that would.
  if ! clang-format-14 --dry-run -Werror "${files[@]}"; then
    echo "not formatted (scripts/format.sh formats them):" >&2
    for f in "${files[@]}"; do
      clang-format-14 --dry-run -Werror "$f" 2>/dev/null || echo "  $f" >&2
    done
    exit 1
  fi
  echo "${#files[@]} files formatted as .clang-format says"
else
  clang-format-14 -i "${files[@]}"
fi
