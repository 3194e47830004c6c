#!/usr/bin/env bash
# test_pollcheck_cost.sh PROGRAM - count the instructions of a not-due
# NEMO_POLL_CHECK() with callgrind (deterministic: an instruction count,
# not a time) and require at most 10 per check, loop included.
set -eu
prog=$1
n=1000000
command -v valgrind >/dev/null || { echo "valgrind is missing (scripts/bootstrap installs it)"; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
valgrind --tool=callgrind --toggle-collect=checks_loop --callgrind-out-file="$out" "$prog" "$n" >/dev/null 2>&1
ir=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$out" | head -1)
[ -n "$ir" ] || ir=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$out" | head -1)
per=$(awk -v ir="$ir" -v n="$n" 'BEGIN { printf "%.2f", ir / n }')
echo "NEMO_POLL_CHECK not due: $ir instructions for $n checks in a loop: $per per check (loop included)"
awk -v p="$per" 'BEGIN { exit !(p <= 10) }'
