#!/usr/bin/env bash
# Checks that the SPIN models still describe the code: every model's
# step-to-line mapping must name lines that hold the code it claims.
#   check_lines.sh [model.pml ...]     (default: every tests/model/*.pml)
#
# Format, in the model's header comment: a line containing
# "Step-to-line mapping:", then one line per step,
#    *   <step>  <path>:<line>  <code>
# <step> is the model's label for the step (no spaces), <path> is relative to
# the repository root, <code> is the text expected on that line. The block
# ends at the first line not of that form (e.g. a bare " *").
#
# Match rule: <code>, with leading and trailing whitespace removed, must occur
# as a fixed string (no pattern) inside the named line with its leading and
# trailing whitespace removed; it must be at least 8 characters long, so that
# a fragment such as "}" or "lock();" cannot match by accident. Quote the
# statement the step is about, and enough of it to be unique in its
# neighbourhood; quote only part of a line that holds "*/" or a quote
# character (the model is run through the C preprocessor: the first would end
# the comment, the second draws a warning).
#
# Fails (exit 1) when a model has no mapping block or an empty one, when a
# named file or line does not exist, when a line no longer holds its code, or
# when two steps name the same line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [ "$#" -eq 0 ]; then
  set -- "$here"/*.pml
fi

trim() {
  local s="$1"
  s="${s#"${s%%[![:space:]]*}"}"
  s="${s%"${s##*[![:space:]]}"}"
  printf '%s' "$s"
}

status=0
for model in "$@"; do
  name="$(basename "$model")"
  if [ ! -f "$model" ]; then
    echo "$name: no such model" >&2
    status=1
    continue
  fi
  # Entries as step<TAB>path<TAB>line<TAB>code; "NOBLOCK" if the header line
  # is missing.
  entries="$(awk '
    BEGIN { state = 0 }
    state == 0 && index($0, "Step-to-line mapping:") { state = 1; found = 1; next }
    state == 1 {
      if (match($0, /^[[:space:]]*\*[[:space:]]+[^[:space:]]+[[:space:]]+[^[:space:]]+:[0-9]+[[:space:]]+[^[:space:]]/)) {
        line = $0
        sub(/^[[:space:]]*\*[[:space:]]+/, "", line)
        step = line; sub(/[[:space:]].*$/, "", step)
        sub(/^[^[:space:]]+[[:space:]]+/, "", line)
        loc = line; sub(/[[:space:]].*$/, "", loc)
        sub(/^[^[:space:]]+[[:space:]]+/, "", line)
        path = loc; sub(/:[0-9]+$/, "", path)
        num = loc; sub(/^.*:/, "", num)
        printf "%s\t%s\t%s\t%s\n", step, path, num, line
      } else {
        state = 2
      }
    }
    END { if (!found) print "NOBLOCK" }
  ' "$model")"
  if [ "$entries" = "NOBLOCK" ]; then
    echo "$name: no mapping (no \"Step-to-line mapping:\" block)" >&2
    status=1
    continue
  fi
  if [ -z "$entries" ]; then
    echo "$name: the mapping block has no entries" >&2
    status=1
    continue
  fi
  checked=0
  failed=0
  # Two steps on one line: a renumbering that left a step behind on a line
  # whose text happens to contain its quote (it happened: a step stayed on a
  # neighbouring call to the same function).
  duplicates="$(printf '%s\n' "$entries" | awk -F'\t' '{ print $2 ":" $3 }' | sort | uniq -d)"
  if [ -n "$duplicates" ]; then
    for loc in $duplicates; do
      echo "$name: two steps are mapped to $loc" >&2
      failed=$((failed + 1))
    done
  fi
  while IFS=$'\t' read -r step path num code; do
    checked=$((checked + 1))
    code="$(trim "$code")"
    file="$root/$path"
    if [ "${#code}" -lt 8 ]; then
      echo "$name: $step $path:$num: quoted code '$code' is shorter than 8 characters" >&2
      failed=$((failed + 1))
      continue
    fi
    if [ ! -f "$file" ]; then
      echo "$name: $step $path:$num: no such file" >&2
      failed=$((failed + 1))
      continue
    fi
    total="$(wc -l < "$file")"
    if [ "$num" -lt 1 ] || [ "$num" -gt "$total" ]; then
      echo "$name: $step $path:$num: the file has $total lines" >&2
      failed=$((failed + 1))
      continue
    fi
    actual="$(trim "$(sed -n "${num}p" "$file")")"
    case "$actual" in
      *"$code"*) ;;
      *)
        echo "$name: $step $path:$num: expected '$code'" >&2
        echo "$name: $step $path:$num:    found '$actual'" >&2
        failed=$((failed + 1))
        ;;
    esac
  done <<< "$entries"
  if [ "$failed" -ne 0 ]; then
    echo "$name: $failed of $checked mapped lines do not hold their code" >&2
    status=1
  else
    echo "$name: $checked mapped lines hold their code"
  fi
done
exit "$status"
