#!/usr/bin/env bash
# test_bench_cli.sh BENCH - nemo-bench's command line: every bad option is
# one line on stderr that names the problem, exit status 2, nothing on
# stdout and nothing measured; help and list succeed.
set -u
bench=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

# expect_usage_error NEEDLE ARGS...: exit 2, one stderr line containing NEEDLE.
expect_usage_error() {
	local needle=$1; shift
	"$bench" "$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$? lines
	lines=$(wc -l <"$tmp/err")
	if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -qF -- "$needle" "$tmp/err" && [ ! -s "$tmp/out" ]; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		echo "FAIL: nemo-bench $* -> exit $rc, $lines stderr lines (wanted 2, 1 line naming '$needle'):"
		sed 's/^/    /' "$tmp/err" "$tmp/out"
	fi
}

expect_ok() {
	local needle=$1; shift
	if "$bench" "$@" >"$tmp/out" 2>"$tmp/err" && grep -qF -- "$needle" "$tmp/out"; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		echo "FAIL: nemo-bench $* should succeed and print '$needle'"
		sed 's/^/    /' "$tmp/err"
	fi
}

ncpu=$(nproc)
expect_usage_error "unknown mechanism 'nope'" unicast --mechanisms futex,nope
expect_usage_error "unknown mechanism 'futex-x'" broadcast --mechanisms futex-x
expect_usage_error "--dst 999" unicast --dst 999
expect_usage_error "--src 4096" unicast --src 4096
expect_usage_error "--src" unicast --src -1
expect_usage_error "--trials" unicast --trials 0
expect_usage_error "--trials" unicast --trials -5
expect_usage_error "--trials" unicast --trials abc
expect_usage_error "--trials" unicast --trials 10x
expect_usage_error "--warmup" unicast --warmup -1
expect_usage_error "$tmp/no/such/dir/x.json" unicast --json "$tmp/no/such/dir/x.json"
touch "$tmp/file"
expect_usage_error "--samples $tmp/file" unicast --samples "$tmp/file"
expect_usage_error "unknown scenario 'bogus'" unicast --scenarios blocked,bogus
expect_usage_error "unknown suite 'bogus'" bogus
expect_usage_error "--waiters does not apply" unicast --waiters 3
expect_usage_error "--dst does not apply" broadcast --dst 1
expect_usage_error "--waiters" broadcast --waiters 0
expect_usage_error "--waiters" broadcast --waiters 257
expect_usage_error "--delay-us" unicast --delay-us 5:1
expect_usage_error "--delay-us" unicast --delay-us abc
expect_usage_error "unknown option '--frobnicate'" unicast --frobnicate
expect_usage_error "needs a value" unicast --trials
expect_usage_error "unexpected argument 'extra'" unicast extra
expect_usage_error "--scenarios does not apply" coherence --scenarios blocked
expect_usage_error "no mechanism supports" unicast --mechanisms spin --scenarios blocked
expect_usage_error "list takes no arguments" list foo
expect_usage_error "unknown policy 'lazy'" policy --policies spin,lazy
expect_usage_error "--gaps" policy --gaps 1,x
expect_usage_error "--policies does not apply" unicast --policies spin
expect_usage_error "--profile does not apply" unicast --profile /tmp/x
expect_usage_error "--trials" calibrate --trials 0
expect_usage_error "--seconds" throughput --seconds 0
expect_usage_error "--seconds" throughput --seconds -1
expect_usage_error "--seconds" throughput --seconds 601
expect_usage_error "--seconds" throughput --seconds abc
expect_usage_error "--seconds" throughput --seconds 1s
expect_usage_error "--seconds" throughput --seconds nan
expect_usage_error "--batch" throughput --batch 0
expect_usage_error "--batch" throughput --batch 4097
expect_usage_error "--rounds" unicast --rounds 0
expect_usage_error "--rounds" unicast --rounds 1001
expect_usage_error "--rounds" unicast --rounds x
expect_usage_error "--rounds" broadcast --rounds 0
expect_usage_error "--poll-policy" broadcast --poll-policy block
expect_usage_error "--poll-policy" broadcast --poll-policy sometimes
expect_usage_error "--poll-delay-us" broadcast --poll-delay-us 2:1
expect_usage_error "--poll-policy does not apply" unicast --poll-policy spin
expect_usage_error "--poll-delay-us does not apply" coherence --poll-delay-us 1
expect_usage_error "no mechanism supports" broadcast --mechanisms futex,condvar --scenarios polling
expect_usage_error "no mechanism supports" broadcast --scenarios loaded
expect_usage_error "--pairs must be all or sample" coherence --pairs some
expect_usage_error "--pairs does not apply" broadcast --pairs all
expect_usage_error "runs backwards" coherence --cpus 1-0
expect_usage_error "--cpus" coherence --cpus 0-x
expect_usage_error "--cpus 4096" broadcast --cpus 4096
expect_usage_error "--batch" throughput --batch 8x
expect_usage_error "needs a value" throughput --seconds
expect_usage_error "--seconds does not apply" unicast --seconds 1
expect_usage_error "--batch does not apply" broadcast --batch 8
expect_usage_error "--trials does not apply" throughput --trials 100
expect_usage_error "--delay-us does not apply" throughput --delay-us 5
expect_usage_error "--waiters does not apply" throughput --waiters 2
expect_usage_error "unknown mechanism 'futex'" throughput --mechanisms futex
expect_usage_error "unknown mechanism 'futex'" preload --mechanisms futex
expect_usage_error "unknown policy 'bogus'" preload --policies block,bogus
expect_usage_error "--batch does not apply" preload --batch 8
expect_usage_error "--gaps does not apply" preload --gaps 1
expect_usage_error "--trials does not apply" preload --trials 3
expect_usage_error "--waiters does not apply" preload --waiters 2
expect_usage_error "--rounds" preload --rounds 0
expect_usage_error "--seconds" preload --seconds 0
if [ "$ncpu" -ge 2 ]; then
	expect_usage_error "--src and --dst are both CPU 1" unicast --src 1 --dst 1
	expect_usage_error "--src and --dst are both CPU 0" throughput --src 0 --dst 0
fi
# No suite at all: usage on stderr, exit 2.
"$bench" >/dev/null 2>&1; rc=$?
if [ $rc -eq 2 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: no arguments -> $rc"; fi
# The failed runs above must not have written the JSON file.
if [ -e "$tmp/no" ]; then fail=$((fail + 1)); echo "FAIL: a failed run created files"; else pass=$((pass + 1)); fi

expect_ok "io_uring-msg-ring" list
expect_ok "usage: nemo-bench SUITE" --help
expect_ok "--mechanisms" unicast --help
expect_ok "--waiters" broadcast --help
expect_ok "coherence" coherence --help
expect_ok "--pairs" coherence --help
expect_ok "--poll-policy" broadcast --help
expect_ok "spin                 [polling]" list
expect_ok "--gaps" policy --help
expect_ok "--profile" calibrate --help
expect_ok "--batch" throughput --help
expect_ok "--policies" preload --help
expect_ok "default 5, 1..1000" preload --help
expect_ok "python-handoff" list
expect_ok "ck-ring" list
expect_ok "nemo-bench " --version

# -h is --help, for every suite.
for suite in unicast broadcast coherence policy throughput preload calibrate event-loop request-reply; do
	expect_ok "usage: nemo-bench $suite" $suite -h
done
mkdir "$tmp/dir.json"
expect_usage_error "it is a directory" unicast --json "$tmp/dir.json"

# wait_row PID: wait until nemo-bench PID measures a row (its thread
# bench-sender exists), polling: up to 60 s on a loaded machine.  False if
# PID ended first or never got there.
wait_row() {
	local pid=$1 i
	for i in $(seq 1200); do
		grep -qx bench-sender /proc/"$pid"/task/*/comm 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
# json_holds FILE EXPR: FILE is valid JSON, and the Python expression EXPR
# holds for it (as d).
json_holds() {
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)' "$1" "$2"
}
ok() { pass=$((pass + 1)); }
not_ok() {
	fail=$((fail + 1))
	echo "FAIL: $1"
	sed 's/^/    /' "$tmp/err"
}

# Ctrl-C during a run keeps what was measured: the row under way ends at
# the next trial, the rest is not measured, and --json and --summary get
# the rows kept (through a temporary file: none is left), the JSON marked
# interrupted; exit status 130.  --warmup 0: a row under way has a trial.
mkdir "$tmp/keep"
echo '{"earlier": "results"}' >"$tmp/keep/r.json"
"$bench" unicast --mechanisms futex --scenarios blocked --warmup 0 --trials 1000000 --rounds 1 \
	--json "$tmp/keep/r.json" --summary "$tmp/keep/r.md" >"$tmp/out" 2>"$tmp/err" &
pid=$!
wait_row $pid && kill -INT $pid
wait $pid; rc=$?
if [ $rc -eq 130 ] && [ "$(ls "$tmp/keep" | tr '\n' ' ')" = "r.json r.md " ] &&
	json_holds "$tmp/keep/r.json" 'd["interrupted"] is True and d["interrupted_by"] == "SIGINT" and
		[(r["mechanism"], r["scenario"]) for r in d["results"]] == [("futex", "blocked")] and
		1 <= d["results"][0]["trials"] < 1000000' &&
	grep -q "interrupted by SIGINT: kept the 1 row measured" "$tmp/err" &&
	grep -q "futex blocked 0>1: [0-9]* trials" "$tmp/err" && grep -Eq "^futex +blocked" "$tmp/out" &&
	grep -q "^| futex | blocked |" "$tmp/keep/r.md" && grep -q "Interrupted by SIGINT" "$tmp/keep/r.md"; then
	ok
else
	not_ok "Ctrl-C during a row -> exit $rc, folder: $(ls "$tmp/keep" | tr '\n' ' '), r.json: $(head -c 300 "$tmp/keep/r.json")"
fi
# SIGTERM before any row has a measured trial (still in the warm-up):
# nothing to keep, so an existing file stays byte for byte; exit 143.
cp "$tmp/keep/r.json" "$tmp/r.json.before"
"$bench" unicast --mechanisms futex --scenarios blocked --warmup 1000000 --delay-us 50 --trials 10 \
	--rounds 1 --json "$tmp/keep/r.json" --quiet >/dev/null 2>"$tmp/err" &
pid=$!
wait_row $pid && kill -TERM $pid
wait $pid; rc=$?
if [ $rc -eq 143 ] && cmp -s "$tmp/r.json.before" "$tmp/keep/r.json" &&
	[ "$(ls "$tmp/keep" | tr '\n' ' ')" = "r.json r.md " ] &&
	grep -q "interrupted by SIGTERM before any row was measured: nothing written; $tmp/keep/r.json left as it was" "$tmp/err"; then
	ok
else
	not_ok "SIGTERM before the first trial -> exit $rc, folder: $(ls "$tmp/keep" | tr '\n' ' ')"
fi
# A second signal ends the run at once (each trial here waits 1 s, so the
# first has not ended it yet): FILE as it was, no temporary file.
"$bench" unicast --mechanisms futex --scenarios blocked --warmup 0 --delay-us 1000000 --trials 5 \
	--rounds 1 --json "$tmp/keep/r.json" --quiet >/dev/null 2>"$tmp/err" &
pid=$!
wait_row $pid && { kill -INT $pid; kill -TERM $pid; }
wait $pid; rc=$?
if [ $rc -eq 143 ] && cmp -s "$tmp/r.json.before" "$tmp/keep/r.json" &&
	[ "$(ls "$tmp/keep" | tr '\n' ' ')" = "r.json r.md " ]; then
	ok
else
	not_ok "a second signal -> exit $rc (wanted 143), folder: $(ls "$tmp/keep" | tr '\n' ' ')"
fi
# A complete run replaces the file, not marked interrupted.
if "$bench" unicast --mechanisms futex --trials 20 --rounds 1 --json "$tmp/keep/r.json" --quiet 2>"$tmp/err" &&
	json_holds "$tmp/keep/r.json" 'd["suite"] == "unicast" and d["interrupted"] is False and
		"interrupted_by" not in d' && [ "$(ls "$tmp/keep" | tr '\n' ' ')" = "r.json r.md " ]; then
	ok
else
	not_ok "a complete run did not replace r.json (folder: $(ls "$tmp/keep" | tr '\n' ' '))"
fi

# --summary: the table as Markdown (.md) or CSV (.csv), one line per row
# (the JSON of the same run says how many); another name is a usage error.
expect_usage_error "--summary $tmp/s.txt: the name must end in .md (Markdown) or .csv (CSV)" \
	unicast --summary "$tmp/s.txt"
expect_usage_error "--summary $tmp/s: the name must end in .md" unicast --summary "$tmp/s"
expect_usage_error "--json - and --summary - cannot both write to standard output" unicast --json - --summary -
expect_usage_error "--summary does not apply to suite calibrate" calibrate --summary "$tmp/c.md"
"$bench" unicast --mechanisms futex --trials 20 --rounds 1 --json "$tmp/s.json" --summary "$tmp/s.md" \
	--quiet 2>"$tmp/err"; rc=$?
"$bench" unicast --mechanisms futex --trials 20 --rounds 1 --json "$tmp/c.json" --summary "$tmp/s.csv" \
	--quiet 2>>"$tmp/err"; rc2=$?
rows=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["results"]))' "$tmp/s.json")
if [ $rc -eq 0 ] && [ "$rows" -ge 1 ] &&
	[ "$(head -1 "$tmp/s.md")" = "| mechanism | scenario | src>dst | trials | p50 ns | p99 ns | send p50 | max ns | ctx/tr | probe |" ] &&
	[ "$(sed -n 2p "$tmp/s.md")" = "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" ] &&
	[ "$(grep -c '^| futex | [a-z]* | [0-9]*>[0-9]* | 20 |' "$tmp/s.md")" -eq "$rows" ] &&
	[ "$(wc -l <"$tmp/s.md")" -eq $((rows + 2)) ]; then
	ok
else
	not_ok "--summary s.md (exit $rc, $rows rows):"; sed 's/^/    /' "$tmp/s.md"
fi
rows=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["results"]))' "$tmp/c.json")
if [ $rc2 -eq 0 ] && [ "$rows" -ge 1 ] &&
	[ "$(head -1 "$tmp/s.csv")" = "mechanism,scenario,src_cpu,dst_cpu,trials,p50_ns,p99_ns,send_p50_ns,max_ns,ctx_switches_per_trial,probe_ns" ] &&
	[ "$(grep -Ec '^futex,[a-z]+,[0-9]+,[0-9]+,20(,[0-9.]+){6}$' "$tmp/s.csv")" -eq "$rows" ] &&
	[ "$(wc -l <"$tmp/s.csv")" -eq $((rows + 1)) ] && [ "$(ls "$tmp" | grep -c '\.tmp\.')" -eq 0 ]; then
	ok
else
	not_ok "--summary s.csv (exit $rc2, $rows rows):"; sed 's/^/    /' "$tmp/s.csv"
fi
# --summary -: Markdown alone on stdout, the printed table on stderr.
"$bench" unicast --mechanisms futex --trials 20 --rounds 1 --summary - >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 0 ] && [ "$(head -c 13 "$tmp/out")" = "| mechanism |" ] && grep -q "p50 ns" "$tmp/err" &&
	! grep -q "  p50 ns" "$tmp/out" && [ ! -e ./- ]; then
	ok
else
	not_ok "--summary - -> exit $rc; stdout starts: $(head -c 80 "$tmp/out")"
fi

# --json - : the document alone on stdout, the table on stderr.
"$bench" unicast --mechanisms futex --trials 20 --rounds 1 --json - >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 0 ] && [ "$(head -c 1 "$tmp/out")" = "{" ] && grep -q '"suite": "unicast"' "$tmp/out" &&
	grep -q "p50 ns" "$tmp/err" && ! grep -q "p50 ns" "$tmp/out" && [ ! -e ./- ]; then
	pass=$((pass + 1))
else
	fail=$((fail + 1))
	echo "FAIL: --json - -> exit $rc; stdout starts: $(head -c 80 "$tmp/out")"
fi

# The policy suite's rows say their gap, in the table and in --summary;
# calibrate prints no empty table.
"$bench" policy --trials 10 --gaps 1,30 --policies block,adaptive --summary "$tmp/p.csv" >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 0 ] && grep -q "src>dst   gap us" "$tmp/out" && grep -Eq "^nemo-event +block +[0-9]+>[0-9]+ +30 " "$tmp/out" &&
	[ "$(head -1 "$tmp/p.csv")" = "mechanism,scenario,src_cpu,dst_cpu,gap_us,repeat,trials,p50_ns,p99_ns,send_p50_ns,max_ns,ctx_switches_per_trial,probe_ns" ] &&
	[ "$(grep -Ec '^nemo-event,(block|adaptive),[0-9]+,[0-9]+,(1|30),[012],10,' "$tmp/p.csv")" -eq 12 ] &&
	[ "$(wc -l <"$tmp/p.csv")" -eq 13 ]; then
	pass=$((pass + 1))
else
	fail=$((fail + 1))
	echo "FAIL: policy rows without a gap column (exit $rc):"
	sed 's/^/    /' "$tmp/out" "$tmp/err"
fi
"$bench" calibrate --trials 20 --profile "$tmp/profile" >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 0 ] && grep -q "profile written" "$tmp/out" && ! grep -q "mechanism" "$tmp/out"; then
	pass=$((pass + 1))
else
	fail=$((fail + 1))
	echo "FAIL: calibrate output (exit $rc):"
	sed 's/^/    /' "$tmp/out" "$tmp/err"
fi

# The preload suite finds its programs beside nemo-bench; alone, it says
# what it looked for (a failed run: exit 1), and measures nothing.
mkdir "$tmp/alone"
cp "$bench" "$tmp/alone/nemo-bench"
"$tmp/alone/nemo-bench" preload --seconds 0.1 --rounds 1 --quiet >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 1 ] && grep -qF "cannot find libnemo-preload.so beside nemo-bench (looked for $tmp/alone/" "$tmp/err" &&
	[ ! -s "$tmp/out" ]; then
	pass=$((pass + 1))
else
	fail=$((fail + 1))
	echo "FAIL: nemo-bench preload without libnemo-preload.so beside it -> exit $rc:"
	sed 's/^/    /' "$tmp/err"
fi

echo "test_bench_cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
