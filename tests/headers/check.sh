#!/bin/sh
# tests/headers/check.sh COMPILER INCLUDE_DIR [JOBS]: every public header
# (INCLUDE_DIR/volt/**/*.hpp) compiles alone, warning-free, with the flags
# below: a one-line translation unit `#include "volt/x.hpp"` per header,
# checked with -fsyntax-only (no code generation), JOBS at a time (default 2).
# Registered as the ctest test headers.standalone (label headers) with
# CMAKE_CXX_COMPILER, so CI runs it under both g++ and clang++. Cost: about
# 45 s of CPU per compiler for the 68 headers (g++ 12 and clang 14 alike),
# so about 25 s on two idle cores. A template is checked only as far as the
# compiler goes without instantiating it: a warning that needs an
# instantiation shows in the test binaries' builds (-Wall -Wextra) instead.
# Exit status: 0 if every header passes; otherwise 1, after printing each
# failing header's diagnostics.
set -eu
if [ $# -lt 2 ]; then
  echo "usage: $0 COMPILER INCLUDE_DIR [JOBS]" >&2
  exit 2
fi
cxx=$1
include_dir=$(cd "$2" && pwd)
jobs=${3:-2}
flags="-std=c++20 -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow -Werror"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT INT TERM

# One job per header: prints nothing and succeeds, or prints the header's name
# and diagnostics into its own file (so parallel output does not interleave).
cat >"$scratch/one.sh" <<'ONE'
#!/bin/sh
header=$1 cxx=$2 include_dir=$3 scratch=$4 flags=$5
log="$scratch/$(echo "$header" | tr / _).log"
# shellcheck disable=SC2086 # flags is a word list
if ! printf '#include "%s"\n' "$header" |
    "$cxx" $flags -fsyntax-only -I"$include_dir" -x c++ - >"$log" 2>&1; then
  { echo "FAIL $header"; cat "$log"; } >"$log.fail"
fi
exit 0
ONE
chmod +x "$scratch/one.sh"

(cd "$include_dir" && find volt -name '*.hpp' | LC_ALL=C sort) >"$scratch/headers"
count=$(wc -l <"$scratch/headers")
if [ "$count" -eq 0 ]; then
  echo "no headers under $include_dir/volt" >&2
  exit 1
fi
xargs -P "$jobs" -I{} "$scratch/one.sh" {} "$cxx" "$include_dir" "$scratch" "$flags" \
  <"$scratch/headers"

failed=0
for f in "$scratch"/*.fail; do
  [ -e "$f" ] || continue
  cat "$f"
  failed=$((failed + 1))
done
echo "$count headers checked with $cxx ($flags): $failed failed"
[ "$failed" -eq 0 ]
