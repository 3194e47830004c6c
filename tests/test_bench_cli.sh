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
for suite in unicast broadcast coherence policy throughput preload calibrate; do
	expect_ok "usage: nemo-bench $suite" $suite -h
done
mkdir "$tmp/dir.json"
expect_usage_error "it is a directory" unicast --json "$tmp/dir.json"

# --json keeps results: an interrupted run leaves an existing file as it
# was and no temporary file beside it; a complete run replaces it.
mkdir "$tmp/keep"
echo '{"earlier": "results"}' >"$tmp/keep/r.json"
"$bench" unicast --trials 100000 --json "$tmp/keep/r.json" --quiet >/dev/null 2>&1 &
pid=$!
for _ in $(seq 50); do
	ls "$tmp/keep"/r.json.tmp.* >/dev/null 2>&1 && break
	sleep 0.1
done
kill -INT $pid
wait $pid; rc=$?
if [ $rc -ne 0 ] && [ "$(cat "$tmp/keep/r.json")" = '{"earlier": "results"}' ] &&
	[ "$(ls "$tmp/keep")" = r.json ]; then
	pass=$((pass + 1))
else
	fail=$((fail + 1))
	echo "FAIL: Ctrl-C during --json: exit $rc, folder: $(ls "$tmp/keep" | tr '\n' ' '), r.json: $(head -c 80 "$tmp/keep/r.json")"
fi
if "$bench" unicast --mechanisms futex --trials 20 --rounds 1 --json "$tmp/keep/r.json" --quiet &&
	grep -q '"suite": "unicast"' "$tmp/keep/r.json" && [ "$(ls "$tmp/keep")" = r.json ]; then
	pass=$((pass + 1))
else
	fail=$((fail + 1))
	echo "FAIL: a complete run did not replace r.json (folder: $(ls "$tmp/keep" | tr '\n' ' '))"
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

# The policy suite's rows say their gap; calibrate prints no empty table.
"$bench" policy --trials 10 --gaps 1,30 --policies block,adaptive >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 0 ] && grep -q "src>dst   gap us" "$tmp/out" && grep -Eq "^nemo-event +block +[0-9]+>[0-9]+ +30 " "$tmp/out"; then
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
