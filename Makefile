# The project's commands. `make demo` and `make test` are all a newcomer needs.
#
#   venv   create .venv with the build and test tools (re-run when pyproject.toml changes)
#   build  compile the Rust core into the venv (maturin develop --release)
#   demo   venv, a quick build of the core (profile `demo`), then simulate
#          scenarios/demo.toml into out/demo; one progress line per stage
#   test   build, then Rust tests, Python tests and the check of the _core stub
#   bench  build, then the benchmarks (bench/results.json; a few minutes)
#   bench-docs  build, all benchmarks, and the tables of docs/performance.md
#   lint   rustfmt, clippy and ruff
#   clean  remove the venv, build outputs and results

SHELL := /bin/bash
.DEFAULT_GOAL := test

# Rust is installed with rustup, which puts cargo in ~/.cargo/bin.
export PATH := $(HOME)/.cargo/bin:$(PATH)

PYTHON ?= python3
VENV := .venv
VBIN := $(VENV)/bin
PY := $(VBIN)/python
PIP := $(VBIN)/pip

.PHONY: venv build build-demo realprogs linux-deps demo test bench bench-docs lint clean

# The `demo` cargo profile: the release profile without link-time
# optimisation, with more codegen units and no debug info. It compiles the
# same code with the same optimisation level, so a run gives the same numbers
# (the demo's summary was compared with the release build's, field by field:
# docs/getting-started.md); it only skips the slow whole-program link.
# Defined here, through cargo's environment, so that Cargo.toml keeps one
# release profile for tests and benchmarks.
DEMO_PROFILE := CARGO_PROFILE_DEMO_INHERITS=release CARGO_PROFILE_DEMO_LTO=false \
	CARGO_PROFILE_DEMO_CODEGEN_UNITS=16 CARGO_PROFILE_DEMO_DEBUG=0

# One line per stage of `make demo`, so that a first run shows what it is doing.
say = @printf '\n==> %s\n' $(1)

venv: $(VENV)/.stamp

# pyproject.toml is the one list of dependencies: the venv gets the
# project's dependencies, its extras test, parquet and dask, and the pinned
# versions of the `dev` extra, without building the project itself (`build`
# and `build-demo` do that, each with its own profile).
VENV_EXTRAS := test parquet dask dev
define REQUIREMENTS_PY
import sys
import tomllib
with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
extras = project["optional-dependencies"]
for req in project["dependencies"] + [r for e in sys.argv[1:] for r in extras[e]]:
    print(req)
endef
export REQUIREMENTS_PY

$(VENV)/.stamp: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PY) -c "$$REQUIREMENTS_PY" $(VENV_EXTRAS) > $(VENV)/requirements.txt
	$(PIP) install -r $(VENV)/requirements.txt
	touch $@

build: venv
	VIRTUAL_ENV=$(CURDIR)/$(VENV) $(VBIN)/maturin develop --release

# The small C programs that `hetsched linux` runs on the real machine.
REALPROGS := build/realprogs
realprogs:
	mkdir -p $(REALPROGS)
	for p in spin chase phases schedprobe; do gcc -O2 -Wall -Wextra -std=gnu11 -o $(REALPROGS)/$$p realprogs/$$p.c || exit 1; done
	gcc -O2 -Wall -Wextra -std=gnu11 -o $(REALPROGS)/threads realprogs/threads.c -pthread
	gcc -O2 -Wall -Wextra -std=gnu11 -static -o $(REALPROGS)/hotplug_bench realprogs/hotplug_bench.c -pthread

# QEMU and a static busybox for `hetsched linux hotplug-bench` (VM mode).
# Installed with apt-get when missing and when we may (root on Debian);
# skipped otherwise, and the VM test is then skipped with the reason.
linux-deps:
	@if command -v qemu-system-x86_64 >/dev/null && [ -x /bin/busybox ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends qemu-system-x86 busybox-static >/dev/null; \
	else echo "linux-deps: qemu-system-x86 or busybox-static missing and apt-get unavailable (not root?); the VM test will be skipped"; fi

build-demo: venv
	$(DEMO_PROFILE) VIRTUAL_ENV=$(CURDIR)/$(VENV) $(VBIN)/maturin develop --profile demo

demo:
	$(call say,"[1/3] Python environment in $(VENV) (the first time: a few minutes of downloads)")
	@$(MAKE) --no-print-directory venv
	$(call say,"[2/3] compiling the simulator (quick profile; the first time: a few minutes)")
	@$(MAKE) --no-print-directory build-demo
	$(call say,"[3/3] running scenarios/demo.toml into out/demo")
	$(VBIN)/hetsched run scenarios/demo.toml --out out/demo

test: build realprogs linux-deps
	cargo test --release -p hetsched-core
	$(PY) -m pytest -q
	$(PY) -m mypy.stubtest hetsched._core

# `bench` uses the extension `build` made (no separate benchmark build);
# `bench-docs` measures everything (instructions per event at every scaling
# point, growth of every policy, the 1024 × 100 000 point) and rewrites the
# generated tables of docs/performance.md.
bench: build
	$(PY) bench/run.py

bench-docs: build
	$(PY) bench/run.py --update-docs --big

lint: venv
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(VBIN)/ruff check $(wildcard python tests bench examples)

clean:
	rm -rf $(VENV) target out results build .pytest_cache .mypy_cache .ruff_cache
	find python tests bench -name __pycache__ -type d -prune -exec rm -rf {} + 2>/dev/null || true
	rm -f python/hetsched/_core.*.so python/hetsched/_core.*.pyd
