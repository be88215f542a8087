# numaprof developer entry points.  `make setup` is idempotent: it installs what is
# missing (Debian packages, .venv, the project with its test extras) and nothing else.
# The project is installed editable: .venv imports the Python files of this checkout, and
# `make build` (part of setup) rebuilds the C parts into build/dev, which a checkout uses
# before any installed copy (numaprof/paths.py).  So an edit is tested without a reinstall.
SHELL := /bin/bash
VENV ?= .venv
# The system interpreter, so that the tools also run for unprivileged users (tests/test_unprivileged.py).
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
NUMAPROF := $(VENV)/bin/numaprof
APT_PACKAGES := build-essential cmake pkg-config gfortran openmpi-bin chromium libcapstone-dev libzydis-dev libhwloc-dev hwloc libjansson-dev libdw-dev \
	libpfm4-dev libnuma-dev numactl linux-perf python3-venv sudo libc6-dbg \
	qemu-system-x86 linux-image-amd64 busybox-static
STAMP := $(VENV)/.installed

.PHONY: setup apt build bytecode demo test test-c test-py test-unit test-e2e test-lab lint bench corpus fidelity clean

setup: apt $(STAMP) build bytecode

apt:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make setup: installing Debian packages:$$missing"; \
	  $(if $(filter 0,$(shell id -u)),,sudo) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# Exact versions from constraints.txt; pyproject.toml only declares compatible ranges.
# The editable install maps each module to its file, so adding, removing or renaming a
# module (a change of its directory's mtime) reinstalls; editing one does not.
PY_DIRS := $(shell find analyzer recommender cli lab numaprof -type d -not -name __pycache__ 2>/dev/null)
$(STAMP): pyproject.toml constraints.txt $(PY_DIRS)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -c constraints.txt -e ".[test,train]" virtme-ng
	@touch $(STAMP)

# The editable install imports the checkout's sources; byte-compile them as pip does for
# an installed copy, so that a run does not compile them again (PYTHONDONTWRITEBYTECODE
# environments never keep what an import compiles: 13 ms of every `numaprof` start here).
bytecode: $(STAMP)
	@$(PY) -m compileall -q -j2 analyzer recommender cli lab numaprof >/dev/null

# Development build of the native parts into build/dev (used from a source checkout); the
# `numaprof` launcher of .venv is replaced by this build's, which runs build/dev's collector.
build:
	@cmake -S . -B build/cmake -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=$(CURDIR)/build/dev -DNMP_CHECKOUT=ON >/dev/null
	@cmake --build build/cmake -j2 >/dev/null
	@cmake --install build/cmake >/dev/null
	@if test -x $(VENV)/bin/numaprof-cli; then install -m 755 build/dev/bin/numaprof $(NUMAPROF); fi

demo: setup
	$(MAKE) -s -C examples
	cd examples && OMP_NUM_THREADS=2 ../$(NUMAPROF) record -o /tmp/numaprof-demo.data -- ./serial_init 2>&1
	$(NUMAPROF) report /tmp/numaprof-demo.data
	$(NUMAPROF) suggest /tmp/numaprof-demo.data --target 2s
	@echo "make demo: numaprof is installed in $(VENV)/; run '. $(VENV)/bin/activate' to have it on your PATH"

test: setup lint test-c test-py

lint:
	$(VENV)/bin/ruff check analyzer recommender cli lab numaprof tests bench

# C unit tests, once plainly and once under AddressSanitizer + UndefinedBehaviorSanitizer.
test-c:
	cmake -S . -B build/ctest -DCMAKE_BUILD_TYPE=Debug >/dev/null && cmake --build build/ctest -j2 >/dev/null
	cd build/ctest && ctest --output-on-failure
	cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DNMP_SANITIZE=ON >/dev/null && cmake --build build/asan -j2 >/dev/null
	cd build/asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure

# Every tier: tests/unit (hand-built data), tests/recorded (stored profiles),
# tests/e2e (records real programs here) and tests/lab (multi-node guests).
test-py:
	NUMAPROF_LAB_REQUIRED=1 $(VENV)/bin/pytest -q tests

# One tier at a time, while developing.
test-unit: setup
	$(VENV)/bin/pytest -q tests/unit tests/recorded

test-e2e: setup
	$(VENV)/bin/pytest -q tests/e2e

test-lab: setup
	NUMAPROF_LAB_REQUIRED=1 $(VENV)/bin/pytest -q tests/lab

bench: setup
	$(PY) bench/run.py

# The realistic-program corpus (tests/progs/corpus) at -O2 and -O3 into build/corpus;
# tests/test_corpus.py and bench/fidelity.py build it themselves too.
corpus:
	$(MAKE) -s -C tests/progs/corpus OUT=$(CURDIR)/build/corpus

fidelity: setup
	$(PY) bench/fidelity.py

clean:
	rm -rf build $(VENV) numaprof.data numaprof.data.old
