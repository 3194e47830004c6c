#!/bin/sh
# test_mpi_abort.sh MPIEXEC N TEST_MPI [MODE] - one rank dies (abort,
# deadreuse) or never finalizes (finalize-stuck): the others must get an
# error (ECONNRESET, ETIMEDOUT), not hang.  Hydra's default kills the
# whole job when one rank exits badly, so this runs with
# -disable-auto-cleanup, and passes when every survivor printed
# "PASS MODE".  (The dead rank's exit status makes mpiexec's own status
# non-zero.)
#
# deadreuse gives the dead rank's pid to another process, which needs the
# dead rank reaped at once: hydra's proxy may leave it a zombie until the
# job ends.  So there each rank runs under a shell that waits for it (a
# command after it, so that the shell does not exec it).  The shell
# traps SIGUSR1, which hydra sends to the survivors when a rank dies
# under -disable-auto-cleanup: it must outlive its rank.
mpiexec=$1 n=$2 prog=$3 mode=${4:-abort}
if [ "$mode" = deadreuse ]; then
	set -- sh -c 'trap : USR1; "$@"; exit $?' sh "$prog" "$mode"
else
	set -- "$prog" "$mode"
fi
out=$(timeout 100 "$mpiexec" -disable-auto-cleanup -n "$n" "$@" 2>&1)
echo "$out"
pass=$(printf '%s\n' "$out" | grep -c "^PASS $mode ")
if [ "$pass" -ne $((n - 1)) ]; then
	echo "test_mpi_abort: $mode: $pass of $((n - 1)) surviving ranks passed"
	exit 1
fi
echo "test_mpi_abort: $mode: all $((n - 1)) surviving ranks passed"
