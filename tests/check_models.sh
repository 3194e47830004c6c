#!/usr/bin/env bash
# check_models.sh MODELS_DIR - model-check the sleep/wake handshakes with
# spin: each model must verify with 0 errors (exhaustive search, with 1 and
# 2 spurious wake-ups allowed), and its -DBROKEN variant must FAIL, so the
# check cannot pass vacuously.
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

for model in slot.pml event.pml; do
	for spur in 1 2; do
		e=$(run "$model" -DMAXSPUR=$spur)
		if [ "$e" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $model (MAXSPUR=$spur): errors=${e:-none}"; fi
	done
	e=$(run "$model" -DBROKEN)
	if [ -n "$e" ] && [ "$e" -gt 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $model -DBROKEN was not caught (errors=${e:-none})"; fi
done
echo "check_models: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
