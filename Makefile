# Two commands set up a fresh machine: `make demo` and `make test`.
# Both install the Debian packages vpuc needs (if missing), configure and build.

BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)

DEB_PACKAGES := cmake ninja-build g++ clang-format \
	libhalide14-0-dev llvm-14-dev \
	flatbuffers-compiler libflatbuffers-dev nlohmann-json3-dev \
	libgtest-dev libgmock-dev libbenchmark-dev

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps configure build demo test bench format clean

all: build

# Installs only what is missing; runs `apt-get update` once, before installing.
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "Installing missing Debian packages:" $$missing; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(BUILD_DIR)/build.ninja: | deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

configure: deps $(BUILD_DIR)/build.ninja

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	$(BUILD_DIR)/tools/vpuc demo --blob $(BUILD_DIR)/demo.vpub --trace $(BUILD_DIR)/demo.trace.json

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

bench: build
	$(BUILD_DIR)/tools/vpuc bench timing-model --reference vpu_target/calibration/vpunn_dpu_reference.csv
	$(BUILD_DIR)/tools/vpuc bench timing-model --reference vpu_target/calibration/vpunn_dma_reference.csv

format:
	find dsl algorithms schedules codegen vpu_target frontend tools tests tutorials bench \
		\( -name '*.cpp' -o -name '*.h' \) 2>/dev/null | xargs -r clang-format -i

clean:
	rm -rf $(BUILD_DIR)
