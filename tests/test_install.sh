#!/usr/bin/env bash
# test_install.sh BUILD_DIR SOURCE_DIR - `cmake --install` into a scratch
# prefix, then build a consumer against it twice: with pkg-config (shared
# and static) and with find_package(nemo) (nemo::nemo, nemo::static, and
# nemo::mpi where MPI was built), each built with no flag but the package's
# own and run with no LD_LIBRARY_PATH: the package makes programs that run
# from any prefix (nemo.pc's -rpath, the CMake targets' link option).
# Proves the installed headers, nemo.pc and the CMake package work without
# the source tree, that the installed libraries and tools find the prefix's
# libraries relative to themselves (RUNPATH $ORIGIN...), also once the
# prefix has moved, that nemo-run runs an unmodified program under the
# installed interposer and --stats says what it did, that the installed
# nemo-bench finds its preload library and programs (preload suite) in the
# installed tree, and that the installed nemo-report runs from the prefix
# (its launcher, its package, the system python3) and says which Debian
# packages to install when its python lacks numpy or matplotlib.
set -eu
build=$(readlink -f "$1") src=$(readlink -f "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset LD_LIBRARY_PATH LD_PRELOAD NEMO_STATS NEMO_WAIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cat >"$tmp/use.c" <<'C'
#include <nemo/nemo.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
	nemo_clock_info ci;
	if (nemo_clock_get_info(&ci) != 0 || strcmp(nemo_version(), NEMO_VERSION_STRING) != 0)
		return 1;
	printf("nemo %s ok\n", nemo_version());
	return 0;
}
C
libdir=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -1)
export PKG_CONFIG_PATH=$libdir
# As the README says, with nothing else: the program runs from this prefix.
cc "$tmp/use.c" -o "$tmp/use-shared" $(pkg-config --cflags --libs nemo)
"$tmp/use-shared"
# ... and the README's first program, exactly as its next line builds it.
awk '/^```c$/ { f = 1; next } f && /^```$/ { exit } f' "$src/README.md" >"$tmp/hello.c"
grep -q nemo_domain_create "$tmp/hello.c" || { echo "test_install: no hello program in README.md"; exit 1; }
(cd "$tmp" && cc hello.c -o hello $(pkg-config --cflags --libs nemo) && ./hello) | grep -q '^hello from another thread: 42$' ||
	{ echo "test_install: the README's hello program did not say hello"; exit 1; }
cc -std=c11 -Wall -Werror "$tmp/use.c" -o "$tmp/use-strict" $(pkg-config --cflags --libs nemo)
"$tmp/use-strict"
# The installed libraries that need libnemo.so find it beside them
# (DT_RUNPATH $ORIGIN), and the installed programs that need a library of
# the prefix find it from bin/ ($ORIGIN/../lib): nothing asks for
# LD_LIBRARY_PATH or ldconfig.
want_runpath() {   # FILE RUNPATH
	got=$(readelf -d "$1" | sed -n 's/.*(RUNPATH) *Library runpath: \[\(.*\)\]$/\1/p')
	[ "$got" = "$2" ] || { echo "test_install: $1 has RUNPATH '$got', not '$2'"; exit 1; }
}
lib=$(dirname "$libdir")
for f in libnemo-instrument.so libnemo-fastio.so; do
	want_runpath "$lib/$f" '$ORIGIN'
done
# hwloc is loaded at run time (src/platform/topo.c), not linked: neither
# libnemo nor the interposer, which goes into every preloaded program,
# names it, and nemo.pc does not require it.
for f in "$(dirname "$libdir")"/libnemo.so "$(dirname "$libdir")"/libnemo-preload.so; do
	if readelf -d "$f" | grep NEEDED | grep -q hwloc; then
		echo "test_install: $f links hwloc"; exit 1
	fi
done
if pkg-config --static --libs nemo | grep -q -- -lhwloc; then
	echo "test_install: nemo.pc still asks for hwloc"; exit 1
fi
cc -std=c11 -Wall -Werror "$tmp/use.c" -o "$tmp/use-static" $(pkg-config --cflags nemo) \
	"$(dirname "$libdir")/libnemo.a" -pthread
"$tmp/use-static"
# ... and the topology still works through it.
cat >"$tmp/topo.c" <<'C'
#include <nemo/nemo.h>
#include <stdio.h>
int main(void)
{
	nemo_topo *t;
	int err = nemo_topo_load(&t);
	if (err) {
		printf("topology: %s\n", nemo_last_error());
		return 1;
	}
	printf("topology: %d CPUs\n", nemo_topo_cpus(t));
	nemo_topo_free(t);
	return 0;
}
C
cc -std=c11 -Wall -Werror "$tmp/topo.c" -o "$tmp/topo" $(pkg-config --cflags --libs nemo)
"$tmp/topo"
# The MPI layer, where nemo was built with it (MPICH found): nemo-mpi.pc,
# the CMake component mpi (nemo::mpi), the library's and nemo-bench-mpi's
# RUNPATH.  An MPI program runs here as a singleton (no mpiexec).
mpi=0
[ -f "$libdir/nemo-mpi.pc" ] && mpi=1
if [ $mpi = 1 ]; then
	want_runpath "$lib/libnemo-mpi.so" '$ORIGIN'
	want_runpath "$tmp/prefix/bin/nemo-bench-mpi" '$ORIGIN/'"$(realpath --relative-to="$tmp/prefix/bin" "$lib")"
	[ -f "$lib/cmake/nemo/nemoMpiTargets.cmake" ] ||
		{ echo "test_install: nemo-mpi.pc is installed but not the CMake target nemo::mpi"; exit 1; }
	cat >"$tmp/mpi.c" <<'C'
#include <nemo/mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	int level;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level);
	nemo_domain *d;
	nemo_mpi *m;
	nemo_mpi_attr a = {.progress = NEMO_MPI_PROGRESS_SEND};
	if (nemo_domain_create(NULL, &d) || nemo_place_join(d, NULL, NULL) ||
	    nemo_mpi_create(d, MPI_COMM_WORLD, &a, &m)) {
		printf("nemo-mpi: %s\n", nemo_last_error());
		return 1;
	}
	nemo_mpi_finalize(m);
	nemo_place_leave();
	nemo_domain_destroy(d);
	MPI_Finalize();
	printf("nemo-mpi %s ok\n", nemo_version());
	return 0;
}
C
	cc "$tmp/mpi.c" -o "$tmp/mpi-pc" $(pkg-config --cflags --libs nemo-mpi)
	"$tmp/mpi-pc" | grep -q "nemo-mpi .* ok" || { echo "test_install: the pkg-config MPI program failed"; exit 1; }
fi
mkdir "$tmp/proj"
cat >"$tmp/proj/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(use C)
find_package(nemo 0.1 REQUIRED)
add_executable(use-cmake ../use.c)
target_link_libraries(use-cmake PRIVATE nemo::nemo)
add_executable(use-cmake-static ../use.c)
target_link_libraries(use-cmake-static PRIVATE nemo::static)
install(TARGETS use-cmake use-cmake-static)
if(WANT_MPI)
  find_package(nemo 0.1 REQUIRED COMPONENTS mpi)
  add_executable(use-cmake-mpi ../mpi.c)
  target_link_libraries(use-cmake-mpi PRIVATE nemo::mpi)
  install(TARGETS use-cmake-mpi)
endif()
CM
cmake -S "$tmp/proj" -B "$tmp/proj/b" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" -DWANT_MPI=$mpi >/dev/null
cmake --build "$tmp/proj/b" >/dev/null
# ... run from its build tree and once installed (CMake drops its own
# build RPATH there: the targets' link option keeps the prefix's).
cmake --install "$tmp/proj/b" --prefix "$tmp/proj/inst" >/dev/null
for d in "$tmp/proj/b" "$tmp/proj/inst/bin"; do
	"$d/use-cmake"
	"$d/use-cmake-static"
	if [ $mpi = 1 ]; then
		"$d/use-cmake-mpi" | grep -q "nemo-mpi .* ok" ||
			{ echo "test_install: $d/use-cmake-mpi (nemo::mpi) failed"; exit 1; }
	fi
done
# A consumer that asks for a component nemo does not have gets CMake's
# "not found" with the reason.
mkdir "$tmp/proj2"
printf 'cmake_minimum_required(VERSION 3.20)\nproject(p C)\nfind_package(nemo REQUIRED COMPONENTS bogus)\n' \
	>"$tmp/proj2/CMakeLists.txt"
if cmake -S "$tmp/proj2" -B "$tmp/proj2/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" >"$tmp/proj2.log" 2>&1; then
	echo "test_install: find_package(nemo COMPONENTS bogus) succeeded"; exit 1
fi
# nemo-run from the prefix: an unmodified program (nemo-handoff links no
# nemo) under the installed interposer; --stats prints its line at exit.
run=$tmp/prefix/bin/nemo-run
[ -x "$run" ] || { echo "test_install: bin/nemo-run was not installed"; exit 1; }
[ "$("$run" --print-library)" = "$(readlink -f "$lib/libnemo-preload.so")" ] ||
	{ echo "test_install: nemo-run uses $("$run" --print-library), not the prefix's interposer"; exit 1; }
"$run" --stats -- "$tmp/prefix/bin/nemo-handoff" --seconds 0.2 --expect-interposed >/dev/null 2>"$tmp/run.err" ||
	{ echo "test_install: nemo-run nemo-handoff failed:"; cat "$tmp/run.err"; exit 1; }
grep -Eq '^nemo-preload: pid [0-9]+ \(nemo-handoff\): interposed [1-9][0-9]* condvar waits, [1-9][0-9]* signals/broadcasts' \
	"$tmp/run.err" || { echo "test_install: nemo-run --stats printed no statistics:"; cat "$tmp/run.err"; exit 1; }
# The preload suite looks beside the installed nemo-bench: PREFIX/bin for
# nemo-handoff and nemo-pool, PREFIX/LIBDIR for libnemo-preload.so.
for f in bin/nemo-pool bin/nemo-handoff; do
	[ -x "$tmp/prefix/$f" ] || { echo "test_install: $f was not installed"; exit 1; }
done
"$tmp/prefix/bin/nemo-bench" preload --mechanisms condvar-handoff,pool --seconds 0.1 --rounds 1 \
	--quiet --json "$tmp/preload.json"
want=$(readlink -f "$(dirname "$libdir")/libnemo-preload.so")
grep -qF "\"preload_library\": \"$want\"" "$tmp/preload.json" ||
	{ echo "test_install: the installed nemo-bench did not use $want:"; grep preload_library "$tmp/preload.json"; exit 1; }
# nemo-report, as the launcher runs it: /usr/bin/python3 (else python3 on
# PATH), or NEMO_PYTHON.  Where the system python lacks numpy/matplotlib,
# use the interpreter the build was configured with (NEMO_PYTHON in the
# cache: the project's .venv), through the launcher's override.
report=$tmp/prefix/bin/nemo-report
[ -x "$report" ] || { echo "test_install: bin/nemo-report was not installed"; exit 1; }
sys_py=/usr/bin/python3
[ -x "$sys_py" ] || sys_py=$(command -v python3 || true)
unset NEMO_PYTHON
if [ -z "$sys_py" ] || ! "$sys_py" -c 'import numpy, matplotlib' 2>/dev/null; then
	NEMO_PYTHON=$(sed -n 's/^NEMO_PYTHON:[A-Z]*=//p' "$build/CMakeCache.txt")
	echo "test_install: ${sys_py:-python3} lacks numpy/matplotlib; nemo-report runs with NEMO_PYTHON=$NEMO_PYTHON"
	export NEMO_PYTHON
	sys_py=$NEMO_PYTHON
fi
(cd "$tmp" && "$report" --help) | grep -q '^usage: nemo-report' ||
	{ echo "test_install: nemo-report --help failed"; "$report" --help; exit 1; }
# The installed package runs, not the source tree's (or an editable install's).
(cd "$tmp" && "$report" --version) | grep -qF "($(readlink -f "$tmp/prefix")/share/nemo/python/nemo_report)" ||
	{ echo "test_install: nemo-report did not run its installed package:"; "$report" --version; exit 1; }
(cd "$tmp" && "$report" build "$src/python/tests/fixtures/unicast.json" -o "$tmp/report" >/dev/null) ||
	{ echo "test_install: nemo-report build failed"; exit 1; }
grep -q 'What to use on this machine' "$tmp/report/index.html" ||
	{ echo "test_install: nemo-report build wrote no advice"; exit 1; }
# A python without numpy/matplotlib (-S: no site-packages): a clear error
# naming the Debian packages, exit status 3.
printf '#!/bin/sh\nexec %s -S "$@"\n' "$sys_py" >"$tmp/bare-python"
chmod +x "$tmp/bare-python"
if ! "$tmp/bare-python" -c 'import numpy' 2>/dev/null; then
	set +e
	err=$(NEMO_PYTHON=$tmp/bare-python "$report" --help 2>&1 >/dev/null)
	rc=$?
	set -e
	[ $rc = 3 ] && echo "$err" | grep -q 'apt-get install python3-numpy python3-matplotlib' ||
		{ echo "test_install: nemo-report without numpy: exit $rc, said: $err"; exit 1; }
fi
# The prefix moved: its tools still find their libraries and the
# interposer, and pkg-config (nemo.pc is relocatable) still builds
# programs that run.
mv "$tmp/prefix" "$tmp/moved"
lib=$tmp/moved/${lib#"$tmp/prefix/"}
[ "$("$tmp/moved/bin/nemo-run" --print-library)" = "$(readlink -f "$lib/libnemo-preload.so")" ] ||
	{ echo "test_install: the moved nemo-run does not find the moved interposer"; exit 1; }
"$tmp/moved/bin/nemo-run" -- "$tmp/moved/bin/nemo-handoff" --seconds 0.1 --expect-interposed >/dev/null
PKG_CONFIG_PATH=$lib/pkgconfig
cc "$tmp/use.c" -o "$tmp/use-moved" $(pkg-config --cflags --libs nemo)
"$tmp/use-moved"
if [ $mpi = 1 ]; then
	set +e
	"$tmp/moved/bin/nemo-bench-mpi" --no-such-option 2>"$tmp/bm.err"
	rc=$?
	set -e
	[ $rc = 2 ] && grep -q '^usage: mpiexec' "$tmp/bm.err" ||
		{ echo "test_install: the moved nemo-bench-mpi did not start (exit $rc):"; cat "$tmp/bm.err"; exit 1; }
fi
echo "test_install: ok"
