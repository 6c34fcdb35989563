#!/usr/bin/env bash
# Seconds from launching `ember serve` to its first /health 200, and its resident memory then:
# what a large KV pool costs at startup (issue 22 item 4: the pool is reserved, not touched).
#
#   scripts/time_to_health.sh [EMBER] [KV_MEMORY] [MODEL]
#   scripts/time_to_health.sh build/release/tools/ember/ember 4GiB
set -euo pipefail
ember="${1:-build/release/tools/ember/ember}"
mem="${2:-4GiB}"
model="${3:-$HOME/.cache/ember/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
port=$((20000 + RANDOM % 10000))
log=$(mktemp)
start=$(date +%s.%N)
"$ember" serve "$model" --port "$port" --kv-cache-memory "$mem" --max-num-seqs 256 --max-model-len 8192 > "$log" 2>&1 &
pid=$!
trap 'kill $pid 2> /dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 6000); do
  curl -sf "http://127.0.0.1:$port/health" > /dev/null && break
  kill -0 $pid 2> /dev/null || { cat "$log"; exit 1; }
  sleep 0.01
done
end=$(date +%s.%N)
rss_kib=$(ps -o rss= -p $pid)
echo "kv $mem: /health after $(echo "$end - $start" | bc) s, resident $((rss_kib / 1024)) MiB"
