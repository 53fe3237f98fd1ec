#!/usr/bin/env bash
# bench/instructions against a stand-in for valgrind: the stand-in reports an
# instruction count that grows by a known amount per timed iteration (twice as
# much for the binary named volt as for the one named tokio) plus a fixed
# start-up, so the test checks the per-op arithmetic (start-up cancelled, the
# row's ops divided out), the filters each side gets (=NAME for volt, the bare
# name for Tokio), the worker count passed on, and that a row a binary does
# not print is reported as failed, with a failing exit status.
set -euo pipefail
script="$1/bench/instructions"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/valgrind" <<'STUB'
#!/usr/bin/env bash
# args: --tool=callgrind --callgrind-out-file=/dev/null BIN --workers N --filter F --warmup 0 --iters K
echo "$@" >> "$(dirname "$0")/calls"
bin="$3"; filter="$7"; iters="${11}"
per=200
[ "$(basename "$bin")" = tokio ] && per=100
case "$filter" in
  *missing) ;;  # a row the binary does not have: nothing on stdout
  *) echo '{"name":"row","ns_per_op":1.0,"allocs_per_op":0.0,"bytes_per_op":0.0,"ops":50}' ;;
esac
echo "==1== I   refs:      $((4000000 + iters * per * 50))" >&2
STUB
chmod +x "$work/valgrind"
printf '#!/bin/sh\n' > "$work/volt" && printf '#!/bin/sh\n' > "$work/tokio"
chmod +x "$work/volt" "$work/tokio"
fail() { echo "FAIL: $1" >&2; exit 1; }
set +e
out="$("$script" --valgrind "$work/valgrind" --bench "$work/volt" --tokio "$work/tokio" --workers 2 \
       spawn_await missing)"
status=$?
set -e
echo "$out"
[ "$status" = 1 ] || fail "exit status $status with a failed row, not 1"
grep -qE '^spawn_await +200\.0 +100\.0 +2\.00$' <<<"$out" || fail "spawn_await row"
grep -qE '^missing +failed: .*printed no row' <<<"$out" || fail "missing row not reported"
grep -q -- "$work/volt --workers 2 --filter =spawn_await --warmup 0 --iters 1" "$work/calls" || fail "volt's filter"
grep -q -- "$work/tokio --workers 2 --filter spawn_await --warmup 0 --iters 3" "$work/calls" || fail "Tokio's filter"
# Bad arguments are refused before anything runs.
if "$script" --valgrind "$work/valgrind" --bench "$work/volt" --tokio "$work/tokio" --workers 0 2>/dev/null; then
  fail "--workers 0 accepted"
fi
if "$script" --valgrind "$work/valgrind" --bench "$work/nothing" --tokio "$work/tokio" 2>/dev/null; then
  fail "a missing volt_bench accepted"
fi
echo "instructions: ok"
