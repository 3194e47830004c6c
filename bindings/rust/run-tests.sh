#!/bin/sh
# bindings/rust/run-tests.sh BUILD_DIR SOURCE_DIR - the Rust crates' tests
# against the libnemo of BUILD_DIR (ctest's `rust` test; make test-rust).
#
#   - cargo missing: exit 77 (ctest shows the test as skipped);
#   - crates.io reachable (cargo fetch works, or the crates are cached):
#     every test, the tokio feature's included, with the committed
#     Cargo.lock (versions that build with rustc 1.63);
#   - otherwise: says that the tokio test is skipped, and runs the other
#     tests offline on a copy of the crates without the tokio dependency.
# Cargo's target directory is BUILD_DIR/cargo, so the tree stays clean.
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
here="$src/bindings/rust"

PATH="$PATH:${CARGO_HOME:-$HOME/.cargo}/bin:/root/.cargo/bin"
if ! command -v cargo >/dev/null 2>&1; then
	echo "rust: SKIPPED: no cargo (scripts/bootstrap installs Debian's)"
	exit 77
fi

export NEMO_LIB_DIR="$build/lib"
export NEMO_INCLUDE_DIRS="$src/include:$build/include"
export CARGO_TARGET_DIR="$build/cargo"
unset RUSTFLAGS CARGO_BUILD_RUSTFLAGS
echo "rust: $(cargo --version), libnemo from $NEMO_LIB_DIR"

cd "$here"
# At most 2 minutes for the download (Debian's cargo 1.63 clones the
# whole crates.io index the first time); the cache is tried first.
if cargo fetch --locked --offline -q 2>/dev/null ||
	CARGO_NET_RETRY=1 timeout 120 cargo fetch --locked -q; then
	cargo test --offline --locked --features tokio
	cargo run --offline --locked -q --example pool 2000 2
	cargo run --offline --locked -q --features tokio --example tokio_fd
else
	echo "rust: SKIPPED: the tokio feature's tests (cargo fetch failed: crates.io unreachable"
	echo "rust:          and tokio not in the cargo cache); the other tests run offline"
	copy="$CARGO_TARGET_DIR/src-without-tokio"
	rm -rf "$copy"
	mkdir -p "$copy"
	cp -r "$here/Cargo.toml" "$here/README.md" "$here/nemo-sys" "$here/nemo" "$copy/"
	# Drop the optional dependency, its feature and its example.
	sed -i -e '/^tokio = {/d' -e 's/^tokio = \["dep:tokio"\]/tokio = []/' -e '/^\[\[example\]\]/,$d' "$copy/nemo/Cargo.toml"
	rm -f "$copy/nemo/examples/tokio_fd.rs"
	cd "$copy"
	cargo test --offline
	cargo run --offline -q --example pool 2000 2
fi
echo "rust: all tests passed"
