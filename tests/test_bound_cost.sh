#!/usr/bin/env bash
# test_bound_cost.sh PROGRAM - instructions per nemo_am_send and per
# nemo_am_send_bound to two receivers that never poll (every send pays
# the fence and hint test of P-S4), callgrind counts: the bound send may
# cost no more than the generic one.  (The bar was 2x fewer until the
# generic send curried itself - src/messaging/bound.c - which closed the
# gap the curried write of Minnich, Floren & McKie's paper measured;
# tests/test_send_cost.sh holds both to absolute bars.)
set -eu
prog=$1
n=20000
command -v valgrind >/dev/null || { echo "valgrind is missing (scripts/bootstrap installs it)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() {   # FUNCTION -> inclusive instructions of that function's calls
	valgrind --tool=callgrind --toggle-collect="$1" --callgrind-out-file="$tmp/$1.out" "$prog" "$n" >/dev/null 2>&1
	sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$tmp/$1.out" | head -1
}
g=$(count loop_generic)
b=$(count loop_bound)
awk -v g="$g" -v b="$b" -v n="$n" 'BEGIN {
	printf "nemo_am_send: %.1f instructions per send; nemo_am_send_bound: %.1f; ratio %.2fx\n", g / n, b / n, g / b
	exit !(g / b >= 1) }'
