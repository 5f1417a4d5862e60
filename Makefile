# Two commands set up a fresh machine: `make demo` and `make test`.
# Both install the Debian packages vpuc needs and the npm package of its ONNX Runtime reference
# (if missing), configure and build.

BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)

DEB_PACKAGES := cmake ninja-build g++ clang-format \
	libhalide14-0-dev llvm-14-dev \
	flatbuffers-compiler libflatbuffers-dev nlohmann-json3-dev \
	libgtest-dev libgmock-dev libbenchmark-dev libseccomp-dev \
	libonnx-dev libprotobuf-dev libonnx-testdata libzip-dev pkg-config \
	libopencv-dnn-dev libopencv-imgcodecs-dev libopencv-imgproc-dev \
	python-matplotlib-data

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps debian-packages onnxruntime-node generators configure build demo test test-long \
	bench format clean

all: build

deps: debian-packages onnxruntime-node

# Installs only what is missing; runs `apt-get update` once, before installing.
debian-packages:
	@missing=$$(for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "Installing missing Debian packages:" $$missing; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# ONNX Runtime, the transformer's independent reference (docs/zoo.md): npm's onnxruntime-node
# (its CPU binaries ship in the package) at the version examples/zoo/ort/package-lock.json
# pins, installed into ORT_DIR when missing or when the lockfile changes. ORT_DIR is shared by
# every build tree, as the generators are; tests/CMakeLists.txt's VPUC_ORT_DIR names the same
# directory. ONNXRUNTIME_NODE_INSTALL=skip keeps the package's install script from fetching
# GPU providers from outside the registry. Node and npm come from Debian when missing.
ORT_DIR := build-ort
ORT_INSTALLED := $(ORT_DIR)/node_modules/onnxruntime-node/package.json

onnxruntime-node: $(ORT_INSTALLED)

$(ORT_INSTALLED): examples/zoo/ort/package.json examples/zoo/ort/package-lock.json | debian-packages
	@command -v node >/dev/null && command -v npm >/dev/null || { \
		echo "Installing Debian's nodejs and npm"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
			nodejs npm; }
	mkdir -p $(ORT_DIR)
	cp examples/zoo/ort/package.json examples/zoo/ort/package-lock.json $(ORT_DIR)/
	cd $(ORT_DIR) && ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund
	touch $@

# The DPU's Halide generators, built once in a plain Release tree of their own, which every
# tree below (build, build-sanitize, build-fuzz) imports rather than building (and, under the
# sanitizers, running) its own: vpu_target/dpu_kernels/CMakeLists.txt.
GENERATOR_BUILD_DIR ?= build-generators
IMPORT_GENERATORS = -Dvpuc_dpu_generators_DIR=$(abspath $(GENERATOR_BUILD_DIR))/cmake

$(GENERATOR_BUILD_DIR)/build.ninja: | deps
	cmake -S vpu_target/dpu_kernels -B $(GENERATOR_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release

generators: deps $(GENERATOR_BUILD_DIR)/build.ninja
	cmake --build $(GENERATOR_BUILD_DIR) -j $(JOBS)

$(BUILD_DIR)/build.ninja: | deps generators
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(IMPORT_GENERATORS)

configure: deps $(BUILD_DIR)/build.ninja

build: configure generators
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The main job: a network of the model zoo written as ONNX, compiled, run on the simulator with
# a photo from a Debian package (matplotlib's sample data: Grace Hopper) as its input, and its
# logits compared with OpenCV DNN's for the same image. The image options are torchvision's
# normalisation of RGB pixels.
VPUC := $(BUILD_DIR)/tools/vpuc
DEMO_MODEL ?= mobilenet_v2
DEMO_IMAGE ?= /usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg
DEMO_DIR := $(BUILD_DIR)/demo
DEMO_INPUT = --input input=$(DEMO_IMAGE) --mean 123.675,116.28,103.53 \
	--scale 0.017125,0.017507,0.017429

demo: build
	$(VPUC) zoo --out $(DEMO_DIR) --model $(DEMO_MODEL)
	$(VPUC) compile $(DEMO_DIR)/$(DEMO_MODEL).onnx -o $(DEMO_DIR)/$(DEMO_MODEL).vpub --quiet
	$(VPUC) run $(DEMO_DIR)/$(DEMO_MODEL).vpub $(DEMO_INPUT) -o $(DEMO_DIR)/vpuc.npz \
		--trace $(DEMO_DIR)/trace.json
	$(VPUC) reference $(DEMO_DIR)/$(DEMO_MODEL).onnx --opencv $(DEMO_INPUT) -o $(DEMO_DIR)/opencv.npz
	$(VPUC) compare $(DEMO_DIR)/vpuc.npz $(DEMO_DIR)/opencv.npz --cosine 0.999

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# The property tests searching for TEST_LONG_MINUTES minutes: random schedules for every layer
# kind, for every registry op in every element type it takes (the layer matrix), and
# compute_at chains, the three executables at once, each splitting the time evenly across its
# kinds; and every registry example in every type on both targets (VPUC_FULL_MATRIX=1; make
# test runs each type on one). Prints the cases each kind ran; fails, showing the log, on any
# mismatch.
TEST_LONG_MINUTES ?= 30
TEST_LONG := schedule_property_test layer_matrix_test compute_at_property_test \
	registry_examples_test

test-long: build
	@cd $(BUILD_DIR)/tests && pids= && trap 'kill $$pids 2>/dev/null; exit 130' INT TERM && \
	echo "test-long: $(TEST_LONG_MINUTES) minutes; logs in $(BUILD_DIR)/tests/*.long.log" && \
	for t in $(TEST_LONG); do \
		VPUC_PROPERTY_MINUTES=$(TEST_LONG_MINUTES) VPUC_FULL_MATRIX=1 ./$$t > $$t.long.log 2>&1 & \
		pids="$$pids $$!"; \
	done; \
	failed=; set -- $(TEST_LONG); \
	for pid in $$pids; do wait $$pid || failed="$$failed $$1"; shift; done; \
	for t in $(TEST_LONG); do grep '^property ' $$t.long.log; done; \
	for t in $$failed; do echo "--- $$t failed:"; cat $$t.long.log; done; \
	[ -z "$$failed" ]

bench: build
	$(BUILD_DIR)/tools/vpuc bench timing-model --reference vpu_target/calibration/vpunn_dpu_reference.csv
	$(BUILD_DIR)/tools/vpuc bench timing-model --reference vpu_target/calibration/vpunn_dma_reference.csv
	$(BUILD_DIR)/tools/vpuc bench timing-model --reference vpu_target/calibration/vpunn_shave_vpu27.csv

# Sanitizers and fuzzing (docs/fuzzing.md).
.PHONY: test-sanitize fuzz fuzz-deps mutation-campaign
SANITIZE_BUILD_DIR ?= build-sanitize
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_RUNS ?=
CAMPAIGN_BLOBS ?= 6000
FUZZ_DEB_PACKAGES := clang-14 libclang-rt-14-dev

# The whole test suite built with AddressSanitizer and UndefinedBehaviorSanitizer (gcc); a
# memory error, a leak or undefined behaviour fails the test that meets it (except where
# tests/ubsan.supp says why not).
$(SANITIZE_BUILD_DIR)/build.ninja: | deps generators
	cmake -S . -B $(SANITIZE_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release -DVPUC_SANITIZE=ON \
		$(IMPORT_GENERATORS)

test-sanitize: deps generators $(SANITIZE_BUILD_DIR)/build.ninja
	cmake --build $(SANITIZE_BUILD_DIR) -j $(JOBS)
	cd $(SANITIZE_BUILD_DIR) && \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions=$(CURDIR)/tests/ubsan.supp \
		ctest --output-on-failure -j $(JOBS)

# Each libFuzzer harness for FUZZ_SECONDS seconds, one after the other, on seeds generated by
# the main build (or, with FUZZ_RUNS=N, for N inputs from a fixed random seed: reproducible); fails
# when any of them finds a crash, a hang or a contract violation.
fuzz-deps:
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(DEB_PACKAGES) $(FUZZ_DEB_PACKAGES)"

$(FUZZ_BUILD_DIR)/build.ninja: | fuzz-deps generators
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_BUILD_DIR) -G Ninja \
		-DCMAKE_BUILD_TYPE=Release -DVPUC_FUZZ=ON $(IMPORT_GENERATORS)

fuzz: build fuzz-deps generators $(FUZZ_BUILD_DIR)/build.ninja
	cmake --build $(FUZZ_BUILD_DIR) -j $(JOBS) --target fuzzers
	tests/fuzz/run_fuzzers.sh $(FUZZ_BUILD_DIR) $(BUILD_DIR)/tests/fuzz/make_fuzz_seeds \
		$(FUZZ_SECONDS) $(FUZZ_RUNS)

# CAMPAIGN_BLOBS mutated blobs through the vpuc command, twice: with the digests a mutation
# makes stale kept, then forged (as an attacker would: kernel faults are then counted apart,
# contained by the sandbox). Failing blobs are kept in $(BUILD_DIR)/campaign-failures.
mutation-campaign: build
	$(BUILD_DIR)/tests/fuzz/vpuc_mutation_campaign --vpuc $(BUILD_DIR)/tools/vpuc \
		--blobs $(CAMPAIGN_BLOBS) --save-failures $(BUILD_DIR)/campaign-failures/kept
	$(BUILD_DIR)/tests/fuzz/vpuc_mutation_campaign --vpuc $(BUILD_DIR)/tools/vpuc \
		--blobs $(CAMPAIGN_BLOBS) --save-failures $(BUILD_DIR)/campaign-failures/forged \
		--forge-digests

format:
	find dsl algorithms schedules codegen vpu_target frontend tools tests tutorials bench \
		\( -name '*.cpp' -o -name '*.h' \) 2>/dev/null | xargs -r clang-format -i

clean:
	rm -rf $(BUILD_DIR) $(GENERATOR_BUILD_DIR) $(ORT_DIR)
