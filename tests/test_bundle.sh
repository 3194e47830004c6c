#!/usr/bin/env bash
# test_bundle.sh BUILD_DIR SOURCE_DIR [PYTHON] - the portable bundle
# (scripts/bundle, `make bundle`) runs from a folder elsewhere with the
# machine's own copies of its libraries out of reach.
#
# It builds the tarball, unpacks it in a scratch folder, and then, in a
# private mount namespace (unshare --mount; unprivileged: --user too), puts
# an empty file over every system copy of every bundled library.  There:
#   - the build tree's nemo-bench, which has no copies beside it, must fail
#     to start: the proof that the system copies are really hidden;
#   - the bundle's nemo-bench list, a short unicast run (spin, futex; its
#     JSON is checked), nemo-handoff under the bundle's preload library,
#     and a short preload suite run (which must find nemo-handoff,
#     nemo-pool and the library in the bundle) must work;
#   - LD_DEBUG=libs of those runs must show every library but glibc's
#     loaded from the bundle's lib/.
# Without namespaces (or with NEMO_BUNDLE_TEST_NO_UNSHARE=1) the system
# copies stay in place, the test says so, and the LD_DEBUG check alone
# decides.
set -eu

# ----------------------------------------------------------------- inside
# test_bundle.sh --inside TMP ROOT BUILD [HIDDEN...]: the runs, in the
# namespace when there is one.
if [ "${1:-}" = --inside ]; then
	tmp=$2 root=$3 build=$4
	shift 4
	if [ $# -gt 0 ]; then
		: >"$tmp/empty"
		for f in "$@"; do
			mount --bind "$tmp/empty" "$f"
			[ ! -s "$f" ] || { echo "FAIL: $f is still readable after the bind mount"; exit 1; }
		done
		echo "hidden: $*"
		if "$build/bin/nemo-bench" list >/dev/null 2>"$tmp/control.err"; then
			echo "FAIL: the build tree's nemo-bench still starts: the system copies are not hidden"
			exit 1
		fi
		echo "control: the build tree's nemo-bench cannot start: $(head -1 "$tmp/control.err")"
	fi
	cd "$root"
	echo "--- ldd, seen from here:"
	ldd ./bin/nemo-bench || true          # the runs below decide
	LD_PRELOAD=$PWD/lib/libnemo-preload.so ldd ./bin/nemo-handoff || true
	echo "---"
	LD_DEBUG=libs ./bin/nemo-bench list >"$tmp/list.out" 2>"$tmp/list.ldd" ||
		{ echo "FAIL: ./bin/nemo-bench list"; grep -v 'trying file\|search path' "$tmp/list.ldd" | tail -5; exit 1; }
	grep -q '^unicast:' "$tmp/list.out" || { echo "FAIL: nemo-bench list printed no unicast suite"; exit 1; }
	LD_DEBUG=libs ./bin/nemo-bench unicast --mechanisms spin,futex --trials 200 --delay-us 5:10 \
		--quiet --json "$tmp/unicast.json" 2>"$tmp/unicast.ldd" ||
		{ echo "FAIL: ./bin/nemo-bench unicast"; tail -5 "$tmp/unicast.ldd"; exit 1; }
	LD_DEBUG=libs LD_PRELOAD=$PWD/lib/libnemo-preload.so ./bin/nemo-handoff --seconds 0.2 \
		--expect-interposed >"$tmp/handoff.out" 2>"$tmp/handoff.ldd" ||
		{ echo "FAIL: nemo-handoff under the bundled preload"; cat "$tmp/handoff.out"; tail -5 "$tmp/handoff.ldd"; exit 1; }
	cat "$tmp/handoff.out"
	./bin/nemo-bench preload --mechanisms condvar-handoff,pool --seconds 0.1 --rounds 1 \
		--quiet --json "$tmp/preload.json" ||
		{ echo "FAIL: ./bin/nemo-bench preload"; exit 1; }
	exit 0
fi

# ---------------------------------------------------------------- outside
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) python=${3:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$src/scripts/bundle" "$build" "$tmp/out" >"$tmp/bundle.log" 2>&1 ||
	{ cat "$tmp/bundle.log"; echo "FAIL: scripts/bundle"; exit 1; }
set -- "$tmp"/out/nemo-bundle-*.tar.gz
[ $# -eq 1 ] && [ -f "$1" ] || { echo "FAIL: scripts/bundle wrote no one tarball: $*"; exit 1; }
head -1 "$tmp/bundle.log"
mkdir "$tmp/elsewhere"
tar -C "$tmp/elsewhere" -xzf "$1"
root=$(echo "$tmp"/elsewhere/nemo-bundle-*)
for f in bin/nemo-bench bin/nemo-handoff bin/nemo-pool lib/libnemo-preload.so README; do
	[ -f "$root/$f" ] || { echo "FAIL: the bundle has no $f"; exit 1; }
done

# The bundled libraries, and every copy of each that this machine's loader
# could find: what ldd resolves for the build tree's files, what ld.so.cache
# lists, what the default folders hold.
bundled=()
for f in "$root"/lib/*.so*; do
	n=${f##*/}
	[ "$n" = libnemo-preload.so ] || bundled+=("$n")
done
[ ${#bundled[@]} -gt 0 ] || { echo "FAIL: the bundle has no library in lib/"; exit 1; }
multiarch=$(gcc -print-multiarch 2>/dev/null || true)
declare -A hide=()
for n in "${bundled[@]}"; do
	found=0
	for p in $(ldd "$build/bin/nemo-bench" "$build/lib/libnemo-preload.so" | awk -v n="$n" '$1 == n && $2 == "=>" { print $3 }') \
		$(ldconfig -p 2>/dev/null | awk -v n="$n" '$1 == n { print $NF }') \
		/lib/$multiarch/$n /usr/lib/$multiarch/$n /lib64/$n /usr/lib64/$n /lib/$n /usr/lib/$n /usr/local/lib/$n; do
		r=$(readlink -e "$p") || continue
		hide[$r]=1
		found=1
	done
	[ $found = 1 ] || { echo "FAIL: found no system copy of $n to hide"; exit 1; }
done
echo "bundled: ${bundled[*]}"

if [ -n "${NEMO_BUNDLE_TEST_NO_UNSHARE:-}" ]; then
	ns=() why="NEMO_BUNDLE_TEST_NO_UNSHARE is set"
elif ! command -v unshare >/dev/null; then
	ns=() why="there is no unshare"
elif [ "$(id -u)" = 0 ] && unshare --mount --propagation private true 2>/dev/null; then
	ns=(unshare --mount --propagation private)
elif unshare --user --map-root-user --mount --propagation private true 2>/dev/null; then
	ns=(unshare --user --map-root-user --mount --propagation private)
else
	ns=() why="unshare --mount fails here ($(unshare --mount true 2>&1 | head -1))"
fi
if [ ${#ns[@]} -gt 0 ]; then
	echo "hiding the system copies in a private mount namespace (${ns[*]})"
	"${ns[@]}" bash "$0" --inside "$tmp" "$root" "$build" "${!hide[@]}"
else
	echo "NOTE: cannot hide the system copies: $why."
	echo "NOTE: checking with LD_DEBUG only that every library comes from the bundle."
	bash "$0" --inside "$tmp" "$root" "$build"
fi

# LD_DEBUG=libs: each "find library=NAME" block ends with the file that was
# loaded as its last "trying file=" line.
libdir=$(readlink -e "$root/lib")
loaded=$(awk '{
		sub(/^ *[0-9]+:[ \t]?/, "")
		if ($0 ~ /^find library=/) { name = $0; sub(/^find library=/, "", name); sub(/ .*/, "", name); file = "" }
		else if ($0 ~ /^ *trying file=/) { file = $0; sub(/^ *trying file=/, "", file) }
		else if ($0 ~ /^[ \t]*$/ && name != "") { print name, file; name = "" }
	} END { if (name != "") print name, file }' "$tmp/list.ldd" "$tmp/unicast.ldd" "$tmp/handoff.ldd" | sort -u)
bad=0
declare -A seen=()
while read -r name file; do
	case $name in
	libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) continue ;;
	esac
	dir=$(dirname "$(readlink -e "$file" 2>/dev/null || echo "/nonexistent/$name")")
	if [ "$dir" = "$libdir" ]; then
		seen[$name]=1
	else
		echo "FAIL: $name was loaded from ${file:-nowhere}, not from the bundle's lib/"
		bad=1
	fi
done <<<"$loaded"
for n in "${bundled[@]}"; do
	[ -n "${seen[$n]:-}" ] || { echo "FAIL: LD_DEBUG shows no load of the bundled $n"; bad=1; }
done
grep -q "calling init: $root/lib/libnemo-preload.so" "$tmp/handoff.ldd" ||
	{ echo "FAIL: the preload library did not come from the bundle"; bad=1; }
[ $bad = 0 ] || exit 1
echo "LD_DEBUG: ${!seen[*]} all loaded from the bundle's lib/"

"$python" - "$tmp/unicast.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["tool"] == "nemo-bench" and doc["suite"] == "unicast", doc.get("suite")
rows = {(r["mechanism"], r["scenario"]): r["trials"] for r in doc["results"]}
assert {m for m, _ in rows} == {"spin", "futex"}, rows
assert all(t == 200 for t in rows.values()), rows
print("unicast JSON: %d rows, %s" % (len(rows), ", ".join("%s/%s" % k for k in sorted(rows))))
PY
"$python" - "$tmp/preload.json" "$root" <<'PY'
import json, os, sys
doc = json.load(open(sys.argv[1]))
root = os.path.realpath(sys.argv[2])
assert doc["suite"] == "preload", doc.get("suite")
lib = doc["config"]["preload_library"]
assert lib == os.path.join(root, "lib", "libnemo-preload.so"), lib
rows = {(r["mechanism"], r["mode"]): r["interposed"] for r in doc["results"]}
assert rows == {(p, m): m != "glibc" for p in ("condvar-handoff", "pool")
                for m in ("glibc", "nemo-default")}, rows
print("preload JSON: %d rows, the library from the bundle" % len(rows))
PY
echo "test_bundle: ok"
