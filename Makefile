# nemo - the commands of the README, and the usual others.
#
#   make            build libnemo, its tools and the examples into build/
#   make test       every test: plain build, ASan+UBSan build, TSan build, Python
#   make report     measure this machine, write out/results/*.json and out/report/index.html
#                   (QUICK=1: a shorter run)
#   make install    install headers, libraries, nemo.pc, the CMake package, nemo-run and the
#                   tools (PREFIX=/usr/local); programs built against it run from PREFIX
#   make bundle     out/nemo-bundle-VERSION-ARCH.tar.gz: nemo-bench with its libraries,
#                   for a machine where nothing can be installed (scripts/bundle)
#
# Each calls scripts/bootstrap first: it installs whatever is missing.

BUILD    ?= build
PREFIX   ?= /usr/local
VENV     := .venv
PYTHON   := $(CURDIR)/$(VENV)/bin/python
CMAKE_FLAGS := -G Ninja -DNEMO_PYTHON=$(PYTHON)

.PHONY: all build test test-plain test-asan test-tsan test-python test-rust report install bundle clean bootstrap fuzz-xproc

all: build

bootstrap:
	@scripts/bootstrap

# configure NAME EXTRA-FLAGS: configure build dir NAME once.
define configure
	@test -f $(1)/build.ninja || cmake -S . -B $(1) $(CMAKE_FLAGS) $(2) >/dev/null
endef

build: bootstrap
	$(call configure,$(BUILD),-DCMAKE_BUILD_TYPE=RelWithDebInfo)
	@cmake --build $(BUILD)

test: test-plain test-asan test-tsan test-python
	@echo "make test: all suites passed"

test-plain: build
	cd $(BUILD) && ctest --output-on-failure -j2

# Only the Rust crates' tests (bindings/rust; also part of test-plain).
test-rust: build
	cd $(BUILD) && ctest --output-on-failure -L rust

# Every C test and smoke run again under AddressSanitizer + UBSan.
test-asan: bootstrap
	$(call configure,build-asan,-DCMAKE_BUILD_TYPE=Debug -DNEMO_SANITIZE=address)
	@cmake --build build-asan
	cd build-asan && ctest --output-on-failure -j2 -LE "python|install"

# The concurrency tests under ThreadSanitizer.
test-tsan: bootstrap
	$(call configure,build-tsan,-DCMAKE_BUILD_TYPE=Debug -DNEMO_SANITIZE=thread)
	@cmake --build build-tsan
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest --output-on-failure -j2 -L concurrency

# The shared-domain corruption fuzzer under ASan+UBSan, 10 minutes
# (FUZZ_SECONDS=N for another length; tests/fuzz_xproc.c).
FUZZ_SECONDS ?= 600
fuzz-xproc: bootstrap
	$(call configure,build-asan,-DCMAKE_BUILD_TYPE=Debug -DNEMO_SANITIZE=address)
	@cmake --build build-asan --target fuzz_xproc
	build-asan/bin/fuzz_xproc $(FUZZ_SECONDS)

# nemo-report's own tests (python/tests).
test-python: bootstrap
	@if [ -d python/tests ]; then cd python && $(PYTHON) -m pytest -q -p no:cacheprovider tests; fi

report: build
	@scripts/report $(if $(QUICK),--quick)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

bundle: build
	@scripts/bundle $(BUILD) out

clean:
	rm -rf $(BUILD) build-asan build-tsan out
