#!/usr/bin/env bash
# Checks that the documentation holds together:
#   1. README.md is at most 12 500 bytes (the front door stays short);
#   2. every relative link in README.md, docs/*.md and bench/README.md names a file that exists;
#   3. every citation of the design in the code ("docs/design.md §N", "design.md §N", optionally
#      followed by a quoted subsection name: §5 "Browsers") names a section "## N." of
#      docs/design.md, and a subsection "### <name>" when one is quoted;
#   4. no file cites the external design any more ("DESIGN §N", "DESIGN.md", "DESIGN section N",
#      "shared/DESIGN").
# Prints every failure and exits 1 if there was one. Needs bash, grep, sed and awk only.
#   usage: scripts/check_docs.sh
set -euo pipefail
cd "$(dirname "$0")/.."

failures=0
fail() {
  echo "check_docs: $*" >&2
  failures=$((failures + 1))
}

# Where code, tests and configuration cite the design.
code_paths=(gateway tests bench tools scripts config deploy clients policies CMakeLists.txt Dockerfile)
existing=()
for p in "${code_paths[@]}"; do [ -e "$p" ] && existing+=("$p"); done

# 1. The size of the front door.
max_readme=12500
readme_bytes=$(wc -c <README.md)
if [ "$readme_bytes" -gt "$max_readme" ]; then
  fail "README.md is $readme_bytes bytes; at most $max_readme"
fi

# 2. Relative links. Fenced code blocks are skipped: their brackets are code, not links.
pages=(README.md bench/README.md)
for f in docs/*.md; do [ -e "$f" ] && pages+=("$f"); done
for page in "${pages[@]}"; do
  dir=$(dirname "$page")
  while IFS=$'\t' read -r line target; do
    target=${target%%#*}                  # an anchor names a place in the file, not a file
    target=${target%% *}                  # [text](file "title")
    [ -z "$target" ] && continue          # a link to an anchor of the same page
    if [ ! -e "$dir/$target" ]; then
      fail "$page:$line: link to $target: no such file"
    fi
  done < <(awk '
    /^[ \t]*```/ { fenced = !fenced; next }
    fenced { next }
    {
      rest = $0
      while (match(rest, /\]\([^)]*\)/)) {
        target = substr(rest, RSTART + 2, RLENGTH - 3)
        rest = substr(rest, RSTART + RLENGTH)
        if (target ~ /^[a-zA-Z][a-zA-Z0-9+.-]*:/) continue   # http:, https:, mailto:
        print NR "\t" target
      }
    }' "$page")
done

# 3. Citations of docs/design.md: each section and quoted subsection must exist.
design=docs/design.md
if [ ! -e "$design" ]; then
  fail "$design is missing"
else
  sections=$(grep -oE '^## [0-9]+\.' "$design" | sed -E 's/^## ([0-9]+)\./\1/' | sort -un)
  subsections=$(grep -E '^### ' "$design" | sed -E 's/^### //')
  citations=$(grep -rhoE --exclude=check_docs.sh '(docs/)?design\.md §[0-9]+( "[^"]+")?' "${existing[@]}" 2>/dev/null |
    sed -E 's/^(docs\/)?design\.md //' | sort -u || true)
  while IFS= read -r c; do
    [ -z "$c" ] && continue
    n=$(sed -E 's/^§([0-9]+).*/\1/' <<<"$c")
    if ! grep -qx "$n" <<<"$sections"; then
      fail "cited $design §$n, which has no heading '## $n.'"
    fi
    if [[ "$c" == *\"* ]]; then
      name=$(sed -E 's/^§[0-9]+ "([^"]+)"$/\1/' <<<"$c")
      # The heading may say more after the name: "Limits beyond the address (keys as data)".
      if ! awk -v n="$name" 'index($0, n) == 1 && (length($0) == length(n) ||
             substr($0, length(n) + 1, 1) ~ /[ (:,]/) { found = 1 } END { exit !found }' \
             <<<"$subsections"; then
        fail "cited $design §$n \"$name\", which has no heading '### $name'"
      fi
    fi
  done <<<"$citations"
fi

# 4. Citations of the external design, which a clone of the repository cannot resolve.
# This script names the patterns it looks for, so it leaves itself out.
# The Redis scripts are left out: their bytes are their SHA-1, which replicas of two versions
# share during a rolling upgrade, so their first comment keeps its old "DESIGN §3, §11"
# (docs/design.md keeps the same section numbers).
stale=$(grep -rnE --exclude=check_docs.sh --exclude='*.lua' "DESIGN( §|\.md|'s| section)|shared/DESIGN" "${existing[@]}" \
  2>/dev/null || true)
if [ -n "$stale" ]; then
  count=$(grep -c '' <<<"$stale")
  fail "$count line(s) still cite the external design (DESIGN §N, DESIGN.md, shared/DESIGN); cite docs/design.md §N:"
  sed 's/^/  /' <<<"$stale" >&2
fi

if [ "$failures" -gt 0 ]; then
  echo "check_docs: $failures failure(s)" >&2
  exit 1
fi
echo "check_docs: README.md $readme_bytes bytes, links and design citations resolve"
