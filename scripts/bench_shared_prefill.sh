#!/usr/bin/env bash
# Serving latency against the shared-step prefill cap: for each round, concurrency C and value V
# of one engine flag (default --shared-step-prefill-tokens), a fresh `ember serve` of SmolLM2
# Q4_1 (2 threads, C sequences, 512 tokens each) gets `ember bench serve` on the random dataset
# (128-token prompts, 64-token outputs, 2C requests, at least 16). Prints one line per run and
# writes each run's JSON and server log under OUT.
#
#   OUT=/tmp/shared_prefill ROUNDS="0 1" CONCS="1 4 16 64" VALUES="0 512" scripts/bench_shared_prefill.sh
#   FLAG=--max-num-batched-tokens VALUES="2048 1024 512 256" scripts/bench_shared_prefill.sh
set -u
cd "$(dirname "$0")/.."
ember=build/release/tools/ember/ember
model=${MODEL:-$HOME/.cache/ember/models/SmolLM2-135M-Instruct.Q4_1.gguf}
flag=${FLAG:---shared-step-prefill-tokens}
out=${OUT:-build/bench_shared_prefill}
mkdir -p "$out"
for round in ${ROUNDS:-0}; do
  for conc in ${CONCS:-16 64}; do
    for value in ${VALUES:-0 512}; do
      port=$((18000 + RANDOM % 1000))
      name="c${conc}_v${value}_r${round}"
      $ember serve "$model" --port $port --threads 2 --max-num-seqs "$conc" --max-model-len 512 $flag "$value" \
        --served-model-name model > "$out/server_$name.log" 2>&1 &
      pid=$!
      for _ in $(seq 150); do curl -sf "http://127.0.0.1:$port/health" > /dev/null && break; sleep 0.2; done
      n=$((conc * 2)); [ $n -lt 16 ] && n=16
      $ember bench serve --base-url "http://127.0.0.1:$port" --model model --label "$flag=$value" --dataset random \
        --input-len 128 --output-len 64 --num-prompts $n --concurrency "$conc" --seed 0 --warmup 2 \
        --result-json "$out/$name.json" 2>&1 | grep "concurrency=" | sed "s/^/c=$conc $flag=$value r=$round /"
      kill $pid; wait $pid 2>/dev/null
    done
  done
done
