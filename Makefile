# hpusim: every set-up step a fresh machine needs, and the two entry points
# `make train` (the main job) and `make test` (every test).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export PIP_CACHE_DIR ?= $(HOME)/.cache/pip
export GOFLAGS ?= -mod=mod
# Use both cores for the build and for pytest workers.
JOBS ?= 2

.PHONY: bench-graphs all setup system-deps system-hl-smi venv build develop train test test-go test-py bench clean

all: build

# Debian packages: OpenBLAS for GEMM (cgo) and graphviz for graph dumps.
system-deps:
	@if ! dpkg -s libopenblas-dev >/dev/null 2>&1 || ! command -v dot >/dev/null 2>&1; then \
		echo "installing libopenblas-dev graphviz"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenblas-dev graphviz >/dev/null; \
	fi

# The Python environment: pinned torch from PyPI (pip's cache keeps re-installs fast).
$(VENV)/.installed: requirements.txt
	python3 -m venv $(VENV)
	$(PIP) install -q -r requirements.txt
	touch $@

venv: $(VENV)/.installed

# Go modules, the Go core, the C++ glue against the installed torch, hl-smi, and the
# install that registers the torch.backends entry point. A regular (not editable) install,
# with the native libraries as package data: `pip list` then shows habana-torch-plugin with
# its version in the last column, which clients parse (an editable one shows a path there).
build: system-deps venv
	go mod download
	$(PY) setup.py -q build_native
	$(PIP) install -q --no-build-isolation --no-deps .
	$(MAKE) --no-print-directory system-hl-smi

# On Gaudi hl-smi is a system program, and optimum-habana runs it as `subprocess.run("hl-smi",
# shell=True, env={"ENABLE_CONSOLE": "true"})`: /bin/sh with no PATH searches its default,
# /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin (a PATH-less exec without a
# shell searches os.defpath, /bin:/usr/bin). /usr/local/bin is where locally installed programs
# go, so the venv's hl-smi gets a link there, unless that shell already finds another hl-smi.
system-hl-smi:
	@found="$$(env -i /bin/sh -c 'command -v hl-smi' || true)"; \
	if [ -n "$$found" ] && [ "$$(readlink -f "$$found")" != "$$(readlink -f $(VENV)/bin/hl-smi)" ] && [ "$$found" != /usr/local/bin/hl-smi ]; then \
		echo "hl-smi: $$found already serves PATH-less shells; not linking"; \
	elif [ -w /usr/local/bin ]; then \
		ln -sfn "$(abspath $(VENV))/bin/hl-smi" /usr/local/bin/hl-smi; \
	else \
		echo "hl-smi: /usr/local/bin is not writable; PATH-less shells (optimum-habana) will not find hl-smi"; \
	fi

# Editable install for working on the package (`pip list` then ends the line with a path).
develop: system-deps venv
	go mod download
	$(PY) setup.py -q build_native
	$(PIP) install -q --no-build-isolation --no-deps -e .
	$(MAKE) --no-print-directory system-hl-smi

setup: build

# The main job: a real training run on the emulated HPU.
train: build
	$(PY) examples/train_digits.py

test: build test-go test-py

test-go:
	go vet ./...
	test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"
	go test ./...
	# The kernels' pure-Go fallbacks (gonum GEMM, Go loops for the C fast paths).
	CGO_ENABLED=0 go test ./kernels
	# The AVX2 paths on any machine (an AVX-512 one runs its AVX-512 kernels above): the
	# run-time cap and the build flag that drops the wider GCC target clones (kernels/isa.h).
	HPUSIM_ISA=avx2 CGO_CFLAGS="$$(go env CGO_CFLAGS) -DHPUSIM_ISA_AVX2" go test ./kernels

# The second pass runs the OpInfo suite, the lazy tests, the reference models and the fast
# C++ kernels' A/B against the Python lowerings in lazy mode, and torch.compile(hpu_backend)
# as a lazy-mode script gets it (graphs run as lazy ops).
test-py:
	$(PY) -m pytest -q -n $(JOBS) tests
	PT_HPU_LAZY_MODE=1 $(PY) -m pytest -q -n $(JOBS) tests/test_opinfo.py tests/test_lazy.py tests/test_lazy_models.py tests/test_kernels_avx2.py \
		tests/test_fast_ops.py tests/test_fast_ops_nn.py tests/test_fast_ops_direct.py tests/test_recipe.py tests/test_compile_host_s21.py tests/test_hpex_optimizers.py tests/test_hpex_kernels.py \
		tests/test_hpu_graphs.py tests/test_model_families.py tests/test_layouts.py tests/test_clients_ops.py \
		tests/test_nn_more_ops.py tests/test_ops_index_more.py tests/test_ops_losses_factories.py \
		tests/test_hpex_embedding_bag.py tests/test_sdpa_masked_rows.py tests/test_lnorm_s20.py tests/test_ops_selection.py tests/test_clients_deepspeed_accelerator.py tests/test_clients_vllm.py tests/test_clients_mixed_linear.py \
		tests/test_compile.py tests/test_compile_strides.py tests/test_compile_output_alias_s21.py tests/test_model_families_more.py tests/test_model_families_extra.py \
		tests/test_torchvision_pool_deform.py tests/test_dtype_semantics.py \
		tests/test_clients_s17_generator.py tests/test_clients_s17_vllm_ops.py tests/test_clients_s17_surface.py \
		tests/test_model_families_s19.py tests/test_compile_clients_s23.py

# Benchmarks (not a test): training-step throughput per mode and GEMM against OpenBLAS;
# prints the tables and writes bench/results.json. E.g. `make bench BENCH_ARGS=--quick`.
bench: build
	$(PY) bench/run.py $(BENCH_ARGS)

# HPU-graph replay against CPU, hpu eager and hpu lazy calls (inference and training steps).
bench-graphs: build
	$(PY) bench/hpu_graphs.py $(GRAPHS_BENCH_ARGS)

clean:
	rm -rf build python/habana_frameworks/torch/lib *.egg-info python/*.egg-info
