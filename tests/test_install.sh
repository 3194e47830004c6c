#!/usr/bin/env bash
# test_install.sh BUILD_DIR SOURCE_DIR - `cmake --install` into a scratch
# prefix, then build a consumer against it twice: with pkg-config (shared
# and static) and with find_package(nemo).  Proves the installed headers,
# nemo.pc and the CMake package work without the source tree, and that the
# installed nemo-bench finds its preload library and programs (preload
# suite) in the installed tree.
set -eu
build=$1 src=$2
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
# Static libnemo with the shared hwloc: nemo.pc must name hwloc as a private need.
pkg-config --static --libs nemo | grep -q -- -lhwloc
cc -std=c11 -Wall -Werror "$tmp/use.c" -o "$tmp/use-static" $(pkg-config --cflags nemo) \
	"$(dirname "$libdir")/libnemo.a" $(pkg-config --libs hwloc) -pthread
"$tmp/use-static"
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
echo "test_install: ok"
