#!/usr/bin/env bash
# test_send_cost.sh PROGRAM - instructions per nemo_am_send and per
# nemo_am_send_bound of a place sending to itself and polling after
# every 8 (tests/send_cost.c), counted by callgrind (a count, not a time):
# the generic send curries itself (src/messaging/bound.c, THE GENERIC SEND
# CURRIES ITSELF) and must stay at or under 130 instructions, the bound
# send at or under 70 (issue 32's bars; they were 277 and 80).
set -eu
prog=$1
n=20000
command -v valgrind >/dev/null || { echo "valgrind is missing (scripts/bootstrap installs it)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() {   # FUNCTION -> inclusive instructions of its calls
	valgrind --tool=callgrind --toggle-collect="$1" --callgrind-out-file="$tmp/$1.out" "$prog" "$n" >/dev/null 2>&1
	sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$tmp/$1.out" | head -1
}
g=$(count nemo_am_send)
b=$(count nemo_am_send_bound)
awk -v g="$g" -v b="$b" -v n="$n" 'BEGIN {
	printf "nemo_am_send: %.1f instructions per send (bar 130); nemo_am_send_bound: %.1f (bar 70)\n", g / n, b / n
	exit !(g / n <= 130 && b / n <= 70) }'
