#!/usr/bin/env bash
# test_nemo_run.sh BIN_DIR - nemo-run in the build tree (the installed one:
# tests/test_install.sh): it runs an unmodified program (nemo-handoff, which
# links no nemo and checks that its condvar calls reached the interposer)
# under the build's libnemo-preload.so, sets NEMO_WAIT and NEMO_STATS as
# asked, passes the program's arguments and exit status through, and
# refuses bad input with a specific message.  --stats: one line per process
# at exit, on stderr or appended to a file.
set -u
bin=$(readlink -f "$1")
run=$bin/nemo-run
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset LD_PRELOAD NEMO_STATS NEMO_WAIT
fail() { echo "test_nemo_run: $*"; exit 1; }
# expect STATUS PATTERN -- CMD...: CMD exits STATUS and its stderr matches PATTERN (grep -E).
expect() {
	local want=$1 pat=$2
	shift 3
	"$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	[ "$rc" = "$want" ] || fail "$* exited $rc, not $want: $(cat "$tmp/err")"
	[ -z "$pat" ] || grep -Eq -- "$pat" "$tmp/err" || fail "$*: stderr lacks /$pat/: $(cat "$tmp/err")"
}

lib=$(readlink -f "$bin/../lib/libnemo-preload.so")
[ "$("$run" --print-library)" = "$lib" ] || fail "--print-library: $("$run" --print-library), not $lib"

# The unmodified program, interposed (it checks that itself), with and
# without "--", and its own options passed through.
expect 0 "" -- "$run" -- "$bin/nemo-handoff" --seconds 0.2 --expect-interposed
expect 0 "" -- "$run" "$bin/nemo-handoff" --seconds 0.2 --expect-interposed
expect 1 "" -- "$bin/nemo-handoff" --seconds 0.1 --expect-interposed   # plain: not interposed
grep -q "interposed: no" "$tmp/out" || fail "nemo-handoff alone: $(cat "$tmp/out")"

# --stats: one line at exit that counts the calls and the waits.
line='^nemo-preload: pid [0-9]+ \(nemo-handoff\): interposed [1-9][0-9]* condvar waits, [1-9][0-9]* signals/broadcasts, 0 semaphore waits, 0 process-shared calls left to glibc; [1-9][0-9]* waits: [0-9]+ polled, [0-9]+ slept; kicks [0-9]+ issued, [0-9]+ avoided; cost of blocking [0-9]+ ns'
expect 0 "$line" -- "$run" --stats -- "$bin/nemo-handoff" --seconds 0.2 --expect-interposed
[ "$(grep -c '^nemo-preload:' "$tmp/err")" = 1 ] || fail "--stats printed $(grep -c '^nemo-preload:' "$tmp/err") lines, not 1"
# --stats=FILE (relative: made absolute, the program may change directory):
# appended, one line per process, nothing on stderr.
(cd "$tmp" && "$run" --stats=stats.txt -- "$bin/nemo-handoff" --seconds 0.1 >/dev/null 2>"$tmp/err2") ||
	fail "--stats=FILE run failed: $(cat "$tmp/err2")"
(cd "$tmp" && "$run" --stats=stats.txt -- "$bin/nemo-pool" --seconds 0.1 >/dev/null 2>>"$tmp/err2") ||
	fail "--stats=FILE pool run failed: $(cat "$tmp/err2")"
! grep -q '^nemo-preload:' "$tmp/err2" || fail "--stats=FILE also wrote to stderr"
grep -Eq "${line%%: interposed*}" "$tmp/stats.txt" && grep -q '(nemo-pool): interposed [1-9]' "$tmp/stats.txt" &&
	[ "$(wc -l <"$tmp/stats.txt")" = 2 ] || fail "stats file: $(cat "$tmp/stats.txt")"
# Without --stats nothing is printed.
expect 0 "" -- "$run" -- "$bin/nemo-handoff" --seconds 0.1
! grep -q '^nemo-preload:' "$tmp/err" || fail "a line without --stats"

# The environment it sets: the interposer after what LD_PRELOAD had, once;
# NEMO_WAIT; the exit status and the arguments passed through.
expect 0 "" -- "$run" --policy hybrid:2000 -- sh -c 'echo "$NEMO_WAIT|$LD_PRELOAD"'
[ "$(cat "$tmp/out")" = "hybrid:2000|$lib" ] || fail "environment: $(cat "$tmp/out")"
expect 0 "" -- env LD_PRELOAD="$lib" "$run" -- sh -c 'echo "$LD_PRELOAD"'
[ "$(cat "$tmp/out")" = "$lib" ] || fail "nested: LD_PRELOAD=$(cat "$tmp/out")"
expect 0 "" -- "$run" --policy=spin -- sh -c 'echo "$NEMO_WAIT"'
[ "$(cat "$tmp/out")" = spin ] || fail "--policy=spin: NEMO_WAIT=$(cat "$tmp/out")"
expect 7 "" -- "$run" -- sh -c 'exit 7'
expect 0 "" -- "$run" -- sh -c '[ "$1" = "a b" ] && [ "$2" = "-x" ]' sh "a b" -x

# Bad input: a specific message and status.
expect 2 "nemo-run: --policy: .*unknown policy 'spinn'" -- "$run" --policy spinn -- true
expect 2 "nemo-run: --policy needs a policy" -- "$run" --policy
expect 2 "nemo-run: unknown option '--bogus'" -- "$run" --bogus -- true
expect 2 "nemo-run: no command to run" -- "$run" --stats
expect 2 "nemo-run: --stats= needs a file name" -- "$run" --stats= -- true
expect 127 "nemo-run: cannot run 'no-such-program-here': No such file or directory" -- "$run" -- no-such-program-here
expect 126 "nemo-run: cannot run '$tmp': Permission denied" -- "$run" -- "$tmp"
# The interposer refuses a NEMO_STATS it cannot read, once, at start.
expect 0 "nemo-preload: NEMO_STATS='yes' is neither 1 \(stderr\) nor a path" -- env NEMO_STATS=yes "$run" -- "$bin/nemo-handoff" --seconds 0.1
! grep -q '^nemo-preload: pid' "$tmp/err" || fail "NEMO_STATS=yes still printed statistics"
expect 0 "" -- "$run" --help
grep -q '^usage: nemo-run' "$tmp/out" || fail "--help: $(cat "$tmp/out")"
echo "test_nemo_run: ok"
