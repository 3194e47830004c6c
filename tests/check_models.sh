#!/usr/bin/env bash
# check_models.sh MODELS_DIR - model-check the sleep/wake handshakes with
# spin: each model must verify with 0 errors (exhaustive search, with 1 and
# 2 spurious wake-ups allowed), and its deliberately broken variants must
# FAIL, so the check cannot pass vacuously.
set -u
dir=$1
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {   # run MODEL FLAGS... ; prints pan's error count
	local model=$1; shift
	rm -f "$tmp"/*
	cp "$dir/$model" "$tmp/" || return 1
	(cd "$tmp" && spin -a "$@" "$model" >/dev/null && gcc -O2 -w -o pan pan.c &&
		./pan -m200000 2>&1) | sed -n 's/.*errors: \([0-9]*\).*/\1/p' | head -1
}

must_pass() {   # MODEL FLAGS...
	local e
	e=$(run "$@")
	if [ "$e" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $*: errors=${e:-none}"; fi
}

must_fail() {   # MODEL FLAGS...: a deliberately broken variant
	local e
	e=$(run "$@")
	if [ -n "$e" ] && [ "$e" -gt 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $* was not caught (errors=${e:-none})"; fi
}

for model in slot.pml event.pml; do
	must_pass "$model" -DMAXSPUR=1
	must_pass "$model" -DMAXSPUR=2
	must_fail "$model" -DBROKEN
done
# The slot queued on a condvar's shared word (waiter.c, SHARED WORD).
must_pass slot.pml -DSHARED -DMAXSPUR=1
must_pass slot.pml -DSHARED -DMAXSPUR=2
must_fail slot.pml -DSHARED -DK1EARLY        # kick reads the word before its CAS
must_fail slot.pml -DSHARED -DBROKEN
echo "check_models: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
