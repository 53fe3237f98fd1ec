#!/usr/bin/env bash
# Runs SPIN on a model and checks the verdict.
#   check.sh <model.pml> <expect: verified|violated> [-DNAME=VALUE ...]
# "verified": the exhaustive search must finish with 0 errors.
# "violated": SPIN must find an error (negative control: proves the model
#             can fail, i.e. that the property is really being checked).
set -euo pipefail
model="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
expect="$2"
shift 2
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
spin -a "$@" "$model" >/dev/null
# -w: warnings in the verifier SPIN generates are not ours (false
# -Wstringop-overflow positives from its bounds-check macro).
# PAN_OPT: the verifier's optimisation. -O0 compiles in a fifth of -O2's time
# and most configurations search for under a second, so -O0 is the default;
# tests/CMakeLists.txt sets -O2 for the few whose search is long enough that
# -O2's 2-3x faster search pays for its compile.
gcc "${PAN_OPT:--O0}" -w -DSAFETY -DCOLLAPSE -o pan pan.c
out="$(./pan -m10000000 2>&1)"
errors="$(printf '%s\n' "$out" | sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p')"
states="$(printf '%s\n' "$out" | grep -E 'states, stored' | head -1)"
if printf '%s\n' "$out" | grep -q "max search depth too small"; then
  echo "search depth exceeded: the search was not exhaustive" >&2
  exit 1
fi
echo "$(basename "$model") $*: errors=$errors ($states)"
case "$expect" in
  verified) [ "$errors" = 0 ] ;;
  violated) [ -n "$errors" ] && [ "$errors" != 0 ] ;;
  *) echo "expect must be verified or violated" >&2; exit 2 ;;
esac
