#!/usr/bin/env bash
# bench/sweep against a stand-in for the comparison script: the stand-in
# prints, per --workers N, a table in compare's format whose ratios encode N,
# so the test checks that each worker count's run lands in its own column,
# the geometric means, the allocations column (highest over the counts), a
# row missing at one count, and that the flags after -- reach both sides.
set -euo pipefail
sweep="$1/bench/sweep"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/compare" <<'STUB'
#!/usr/bin/env bash
# args: --rounds R -- --workers N [flags] -- BENCH
echo "$@" >> "$(dirname "$0")/calls"
n="$5"
echo "benchmark                     project        tokio   ratio      spread   allocs/op p|t"
case "$n" in
  1) echo "spawn_many          100.0ns 200.0ns 0.50 0.40-0.60 1.00|1.00"
     echo "channel_mpmc        300.0ns 100.0ns 3.00 2.00-4.00 0.00|0.00" ;;
  2) echo "spawn_many          100.0ns 400.0ns 0.25 0.20-0.30 2.00|1.00"
     echo "channel_mpmc        100.0ns 100.0ns 1.00 0.90-1.10 0.00|0.00"
     echo "only_at_two         100.0ns 100.0ns 0.80 0.70-0.90 0.00|0.00" ;;
  *) echo "spawn_many          100.0ns 100.0ns 1.00 1.00-1.00 1.00|3.00"
     echo "channel_mpmc        100.0ns 100.0ns - - nan|nan" ;;
esac
echo "geometric mean ratio 1.000; project faster on 1/2; missing on project side: 0"
STUB
chmod +x "$work/compare"
printf '#!/bin/sh\n' > "$work/bench" && chmod +x "$work/bench"
out="$(VOLT_COMPARE="$work/compare" "$sweep" --rounds 2 --workers 1,2,4 --bench "$work/bench" \
       --json "$work/out.json" -- --filter x)"
echo "$out"
fail() { echo "FAIL: $1" >&2; exit 1; }
grep -qE '^spawn_many +0\.50 \( *0\.40-0\.60\) +0\.25 \( *0\.20-0\.30\) +1\.00 \( *1\.00-1\.00\) +2\.00\|3\.00$' <<<"$out" \
  || fail "spawn_many row"
grep -qE '^channel_mpmc +3\.00 \( *2\.00-4\.00\) +1\.00 \( *0\.90-1\.10\) +- +0\.00\|0\.00$' <<<"$out" \
  || fail "channel_mpmc row (no ratio at 4 workers)"
grep -qE '^only_at_two +- +0\.80 \( *0\.70-0\.90\) +- ' <<<"$out" || fail "row measured at one count only"
# geometric means: sqrt(0.5*3)=1.225 (1 of 2 ahead), (0.25*1*0.8)^(1/3)=0.585 (2 of 3), 1.000 (0 of 1)
grep -qE '^geomean, rows ahead +1\.225 +1/2 +0\.585 +2/3 +1\.000 +0/1' <<<"$out" || fail "geometric means"
[ "$(wc -l < "$work/calls")" = 3 ] || fail "one compare run per worker count"
grep -q -- '--rounds 2 -- --workers 4 --filter x -- '"$work/bench" "$work/calls" || fail "flags passed on"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["workers"]==[1,2,4]; assert d["rows"][0]["name"]=="channel_mpmc"' "$work/out.json" \
  || fail "json"
# A flag the sweep owns is refused after the --.
if VOLT_COMPARE="$work/compare" "$sweep" --bench "$work/bench" -- --workers 3 2>/dev/null; then
  fail "--workers after -- accepted"
fi
echo "sweep: ok"
