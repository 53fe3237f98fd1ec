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
# PAN_OPT: how to build and run the verifier. Unset: gcc -O0, which compiles
# pan.c in about a second, and most configurations search for under a second.
# PAN_OPT=fast (tests/CMakeLists.txt sets it for the configurations whose
# search takes 25 s or more at -O0): an optimised verifier, built by clang -O1
# when clang is installed, and a hash table of 2^26 slots instead of 2^24
# (the largest searches store 24-37 million states: shorter collision chains,
# about 10% less search time). For the largest configuration (channel
# permit.cap2, 37 million states), one sitting, compile + search: gcc -O0
# 3.5 + 83 s, clang -O0 2.5 + 101 s, clang -O1 15.5 + 51 s, clang -O2 22 +
# 50 s (gcc -O1 took 158 s to compile).
cc=(gcc -O0)
search=()
if [ "${PAN_OPT:-}" = fast ]; then
  if command -v clang >/dev/null; then cc=(clang -O1); else cc=(gcc -O2); fi
  search=(-w26)
fi
# A negative control only has to find its error, and an error found by a
# bitstate search (one bit a state, no stored states to compare) is a real
# error trail: so the controls search in bitstate mode, 2^28 bits (32 MiB).
# Its hashing is deterministic, so a control that finds its error finds it
# every run. All 52 controls, two at a time, one sitting: 163 s of CPU with
# -DCOLLAPSE, 147 s with -DBITSTATE (74 s of wall time against 82).
# Controls are compiled by clang -O0 when installed: half gcc -O0's compile
# time (0.5 s against 1.0 for steal_queue), and a control's search, which
# stops at its first error, is short.
store=(-DCOLLAPSE)
if [ "$expect" = violated ]; then
  store=(-DBITSTATE)
  search=(-w28)
  if command -v clang >/dev/null; then cc=(clang -O0); fi
fi
"${cc[@]}" -w -DSAFETY "${store[@]}" -o pan pan.c
# -m: the search stack's depth. The verifier allocates and zeroes it whole
# at the start: 10 million steps took 0.45 s of system time a run (of a
# 0.9 s steal_queue search), a million 0.05 s (CI's model stage: 506 s ->
# 437 s); the deepest configuration reaches 4,116 steps (2026-11-29). A
# search that needs more fails below ("max search depth too small"), never
# passes short.
out="$(./pan -m1000000 "${search[@]}" 2>&1)"
errors="$(printf '%s\n' "$out" | sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p')"
states="$(printf '%s\n' "$out" | grep -E 'states, stored' | head -1)"
if printf '%s\n' "$out" | grep -q "max search depth too small"; then
  echo "search depth exceeded: the search was not exhaustive" >&2
  exit 1
fi
depth="$(printf '%s\n' "$out" | sed -n 's/.*depth reached \([0-9][0-9]*\).*/\1/p' | head -1)"
echo "$(basename "$model") $*: errors=$errors ($states; depth reached $depth)"
case "$expect" in
  verified) [ "$errors" = 0 ] ;;
  violated) [ -n "$errors" ] && [ "$errors" != 0 ] ;;
  *) echo "expect must be verified or violated" >&2; exit 2 ;;
esac
