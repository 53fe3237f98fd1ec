#!/usr/bin/env bash
# tests/docs/check_links.sh SOURCE_DIR: every relative link in the project's
# markdown (README.md, docs/*.md, examples/*.md) names a file or directory of
# the repository, and every #anchor names a heading of its target; a link out
# of the clone (../..) fails. Registered as the ctest test docs.links.
set -euo pipefail
cd "$1"
status=0
# GitHub's anchor of a heading: lower case, punctuation other than - and _
# dropped, spaces to -.
anchors() { sed -n 's/^#\{1,6\} //p' "$1" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9 _-]//g; s/ /-/g'; }
for md in README.md docs/*.md examples/*.md; do
  [ -f "$md" ] || continue
  dir="$(dirname "$md")"
  # ](target) links outside code spans and fenced blocks.
  while IFS= read -r target; do
    case "$target" in http://* | https://* | mailto:*) continue ;; esac
    path="${target%%#*}"
    anchor=""
    [[ "$target" == *"#"* ]] && anchor="${target#*#}"
    file="$md"
    if [ -n "$path" ]; then
      file="$dir/$path"
      resolved="$(realpath -m "$file")"
      case "$resolved/" in
        "$(pwd)"/*) ;;
        *) echo "$md: link leaves the repository: $target"; status=1; continue ;;
      esac
      if [ ! -e "$file" ]; then
        echo "$md: no such file: $target"
        status=1
        continue
      fi
    fi
    if [ -n "$anchor" ] && [ -f "$file" ] && [[ "$file" == *.md ]]; then
      if ! anchors "$file" | grep -qx -- "$anchor"; then
        echo "$md: no heading for #$anchor in $file"
        status=1
      fi
    fi
  done < <(awk '/^```/ {fence = !fence; next} !fence' "$md" | sed 's/`[^`]*`//g' |
             grep -o '\]([^)]*)' | sed 's/^](//; s/)$//')
done
outside='\.\./shared/|seeds/[a-z-]+\.(txt|md)'
if grep -rIlE --exclude-dir=build --exclude-dir=.git --exclude=check_links.sh "$outside" .; then
  echo "(above) files that point outside the repository"
  status=1
fi
exit $status
