#!/usr/bin/env bash
# test_calibrate.sh BENCH - `nemo-bench calibrate` writes a profile that
# the adaptive policy then reads (source "profile"), and refuses an
# unwritable path with exit status 1 and a message naming it.
set -u
bench=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$bench" calibrate --trials 50 --profile "$tmp/p" --json "$tmp/c.json" >"$tmp/out" 2>&1 || { echo "calibrate failed:"; cat "$tmp/out"; fail=1; }
grep -q '^block_wake_ns [0-9]' "$tmp/p" || { echo "profile lacks block_wake_ns"; fail=1; }
grep -q '^block_cpu_ns [0-9]' "$tmp/p" || { echo "profile lacks block_cpu_ns"; fail=1; }
grep -q '"block_wake_ns"' "$tmp/c.json" || { echo "JSON lacks block_wake_ns"; fail=1; }
# A later process reads it: the policy suite reports its calibration source.
NEMO_PROFILE="$tmp/p" "$bench" policy --policies adaptive --gaps 5 --trials 20 --quiet --json "$tmp/pol.json" || fail=1
grep -q '"source": "profile"' "$tmp/pol.json" || { echo "the adaptive policy did not read the profile"; fail=1; }
if "$bench" calibrate --trials 20 --profile /nonexistent-dir/p >"$tmp/out" 2>&1; then
	echo "an unwritable profile path was accepted"; fail=1
elif ! grep -q "/nonexistent-dir/p" "$tmp/out"; then
	echo "the error does not name the path:"; cat "$tmp/out"; fail=1
fi
echo "test_calibrate: $([ $fail = 0 ] && echo all checks passed || echo FAILED)"
exit $fail
