#!/usr/bin/env bash
# smoke.sh BENCH SUITE MECHANISM [ARGS...] - one short run of one
# mechanism: it must hand over every wake-up (the harness ends a run that
# stalls with an error) and write one JSON row per scenario, each with the
# number of trials asked for.  No time is asserted.
set -u
bench=$1 suite=$2 mech=$3; shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trials=40
delay="--delay-us 5:10"
[ "$suite" = policy ] && delay=""
mechs="--mechanisms $mech"
[ "$suite" = policy ] && mechs=""     # one mechanism, named for the row check
if ! "$bench" "$suite" $mechs --trials $trials $delay --quiet \
	--json "$tmp/r.json" --samples "$tmp/s" "$@"; then
	echo "smoke $suite/$mech: nemo-bench failed"; exit 1
fi
rows=$(grep -c "\"mechanism\": \"$mech\"" "$tmp/r.json")
ntrials=$(grep -c "\"trials\": $trials" "$tmp/r.json")   # config + each row
nsamples=$(ls "$tmp/s" | wc -l)
if [ "$rows" -ge 1 ] && [ "$ntrials" -eq $((rows + 1)) ] && [ "$nsamples" -eq "$rows" ]; then
	for f in "$tmp"/s/*.csv; do
		lines=$(($(wc -l <"$f") - 1))
		if [ "$suite" = broadcast ]; then continue; fi
		[ "$lines" -eq $trials ] || { echo "smoke $suite/$mech: $f has $lines samples, wanted $trials"; exit 1; }
	done
	echo "smoke $suite/$mech: $rows rows ok"
	exit 0
fi
echo "smoke $suite/$mech: rows=$rows trial-fields=$ntrials sample-files=$nsamples"
cat "$tmp/r.json" | head -50
exit 1
