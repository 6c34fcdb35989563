# The two commands a newcomer runs (README.md): `make serve` and `make test`.
PRESET ?= release
BUILD_DIR := build/$(PRESET)
JOBS ?= $(shell nproc)

.PHONY: setup build test serve bench clean

setup:
	@scripts/setup

build: setup
	@cmake --preset $(PRESET) > /dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS)

test: build
	@ctest --preset $(PRESET) -j $(JOBS)

serve: build
	@echo "ember serve is not built yet (issue: the OpenAI-compatible server)."
	@echo "What runs today:"
	@echo "  scripts/fetch_models.py --model smollm2"
	@echo "  $(BUILD_DIR)/tools/ember/ember chat --model ~/.cache/ember/models/SmolLM2-135M-Instruct.Q4_1.gguf"
	@echo "  $(BUILD_DIR)/tools/ember/ember generate --model tests/golden/muse_spark/tiny_a --prompt-ids 1,2,3 --max-tokens 8"
	@echo "  $(BUILD_DIR)/tools/ember/ember inspect --model tests/golden/muse_spark/tiny_a"

bench: build
	@$(BUILD_DIR)/tools/ember/ember bench decode

clean:
	rm -rf build
