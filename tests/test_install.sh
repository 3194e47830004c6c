#!/usr/bin/env bash
# test_install.sh BUILD_DIR SOURCE_DIR - `cmake --install` into a scratch
# prefix, then build a consumer against it twice: with pkg-config (shared
# and static) and with find_package(nemo).  Proves the installed headers,
# nemo.pc and the CMake package work without the source tree, and that the
# installed nemo-bench finds its preload library and programs (preload
# suite) in the installed tree, and that the installed nemo-report runs from
# the prefix (its launcher, its package, the system python3) and says which
# Debian packages to install when its python lacks numpy or matplotlib.
set -eu
build=$(readlink -f "$1") src=$(readlink -f "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
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
cc -std=c11 -Wall -Werror "$tmp/use.c" -o "$tmp/use-shared" $(pkg-config --cflags --libs nemo) \
	-Wl,-rpath,"$(dirname "$libdir")"
"$tmp/use-shared"
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
cc -std=c11 -Wall -Werror "$tmp/topo.c" -o "$tmp/topo" $(pkg-config --cflags --libs nemo) \
	-Wl,-rpath,"$(dirname "$libdir")"
"$tmp/topo"
mkdir "$tmp/proj"
cat >"$tmp/proj/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(use C)
find_package(nemo 0.1 REQUIRED)
add_executable(use-cmake ../use.c)
target_link_libraries(use-cmake PRIVATE nemo::nemo)
add_executable(use-cmake-static ../use.c)
target_link_libraries(use-cmake-static PRIVATE nemo::static)
CM
cmake -S "$tmp/proj" -B "$tmp/proj/b" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/proj/b" >/dev/null
"$tmp/proj/b/use-cmake"
"$tmp/proj/b/use-cmake-static"
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
echo "test_install: ok"
