#!/usr/bin/env bash
# smoke.sh BENCH SUITE MECHANISM [ARGS...] - one short run of one
# mechanism: it must hand over every wake-up (the harness ends a run that
# stalls with an error) and write at least one JSON row of it; every row
# (the broadcast suite adds its one-way spin rows) has the number of
# trials asked for and a samples file with one line per trial, and per
# waiter for a broadcast row (`-k<K>.csv`: K lines for each trial, waiters
# 0..K-1).  No time is asserted.
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
allrows=$(grep -c "\"mechanism\": " "$tmp/r.json")
ntrials=$(grep -c "\"trials\": $trials" "$tmp/r.json")   # config + each row
nsamples=$(ls "$tmp/s" | wc -l)
if [ "$rows" -ge 1 ] && [ "$ntrials" -eq $((allrows + 1)) ] && [ "$nsamples" -eq "$allrows" ]; then
	for f in "$tmp"/s/*.csv; do
		lines=$(($(wc -l <"$f") - 1))
		k=1
		case "$f" in *-k[0-9]*.csv) k=${f##*-k}; k=${k%.csv} ;; esac
		[ "$lines" -eq $((trials * k)) ] ||
			{ echo "smoke $suite/$mech: $f has $lines samples, wanted $((trials * k))"; exit 1; }
		if head -1 "$f" | grep -q '^trial,waiter,'; then
			# trial,waiter,...: every trial 0..trials-1 has waiters 0..K-1 once each.
			bad=$(awk -F, -v k="$k" -v n="$trials" 'NR > 1 { seen[$1 "," $2]++; t[$1]++
				if ($2 < 0 || $2 >= k || $1 < 0 || $1 >= n) bad++ }
				END { for (x in seen) if (seen[x] != 1) bad++
				      for (x in t) if (t[x] != k) bad++
				      print bad + 0 }' "$f")
			[ "$bad" -eq 0 ] || { echo "smoke $suite/$mech: $f: trials and waiters do not match"; exit 1; }
		fi
	done
	echo "smoke $suite/$mech: $rows rows ok ($allrows in all)"
	exit 0
fi
echo "smoke $suite/$mech: rows=$rows of $allrows, trial-fields=$ntrials sample-files=$nsamples"
head -50 "$tmp/r.json"
exit 1
