#!/bin/bash
# The drafter's share of a warm server's time: serves SmolLM2 Q4_1 with a speculative config at C
# concurrent requests, sends C warm-up prompts and then N chat prompts (bench/datasets/
# dspark_chat.jsonl, 128 output tokens), and prints `ember bench serve`'s throughput, speculation
# and proposer lines. With a fixed-k config every step drafts, so two builds' proposer seconds
# over the same verification steps compare their drafting steps (bench/results/dspark_s39).
#
#   scripts/dspark/proposer_time.sh BINARY C N SPECULATIVE_CONFIG_JSON
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=$1; C=$2; N=$3; SPEC=$4
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
MODEL=$HOME/.cache/ember/models/SmolLM2-135M-Instruct.Q4_1.gguf
LOG=$(mktemp)
"$BIN" serve "$MODEL" --port "$PORT" --threads 2 --max-num-seqs "$C" --max-model-len 2048 \
  --served-model-name model --speculative-config "$SPEC" > "$LOG" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -f "$LOG"' EXIT
for _ in $(seq 100); do curl -s "127.0.0.1:$PORT/health" > /dev/null && break; sleep 0.3; done
bench() {
  build/release/tools/ember/ember bench serve --base-url "http://127.0.0.1:$PORT" --model model \
    --dataset jsonl --dataset-path bench/datasets/dspark_chat.jsonl --output-len 128 --concurrency "$C" "$@"
}
bench --num-prompts "$C" --seed 10000 > /dev/null
bench --num-prompts "$N" --seed 1 | grep -E "concurrency=|speculation:|proposer:"
