#!/usr/bin/env bash
# smoke_rounds.sh BENCH SUITE ROWS ROUNDS [ARGS...] - one short run of a
# suite that runs for --seconds in --rounds rounds (event-loop): nemo-bench
# checks every hand-off itself and fails the run otherwise; here, the
# document must have ROWS rows, each of ROUNDS rounds (its "trials"), and
# a samples file per row with one line per round.  No time is asserted.
set -u
bench=$1 suite=$2 want=$3 rounds=$4; shift 4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$bench" "$suite" --rounds "$rounds" --quiet --json "$tmp/r.json" --samples "$tmp/s" "$@"; then
	echo "smoke $suite: nemo-bench failed"; exit 1
fi
rows=$(grep -c '"mechanism": ' "$tmp/r.json")
ntrials=$(grep -c "\"trials\": $rounds,\?\$" "$tmp/r.json")    # config + each row
nsamples=$(ls "$tmp/s" | wc -l)
if [ "$rows" -ne "$want" ] || [ "$ntrials" -ne $((rows + 1)) ] || [ "$nsamples" -ne "$rows" ]; then
	echo "smoke $suite: rows=$rows (want $want), trial-fields=$ntrials, sample-files=$nsamples"
	head -60 "$tmp/r.json"
	exit 1
fi
for f in "$tmp"/s/*.csv; do
	lines=$(($(wc -l <"$f") - 1))
	[ "$lines" -eq "$rounds" ] || { echo "smoke $suite: $f has $lines rounds, wanted $rounds"; exit 1; }
done
echo "smoke $suite: $rows rows of $rounds rounds ok"
