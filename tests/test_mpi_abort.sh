#!/bin/sh
# test_mpi_abort.sh MPIEXEC N TEST_MPI - a rank dies without finalizing:
# the others must get an error (ECONNRESET), not hang.  Hydra's default
# kills the whole job when one rank exits badly, so this runs with
# -disable-auto-cleanup, and passes when every survivor printed PASS.
# (The dead rank's exit status makes mpiexec's own status non-zero.)
mpiexec=$1 n=$2 prog=$3
out=$(timeout 100 "$mpiexec" -disable-auto-cleanup -n "$n" "$prog" abort 2>&1)
echo "$out"
pass=$(printf '%s\n' "$out" | grep -c '^PASS abort')
if [ "$pass" -ne $((n - 1)) ]; then
	echo "test_mpi_abort: $pass of $((n - 1)) surviving ranks passed"
	exit 1
fi
echo "test_mpi_abort: all $((n - 1)) surviving ranks got ECONNRESET"
