#!/usr/bin/env python3
"""Paired A/B of `ember serve` configurations on a noisy host: the ratio of each configuration's
output tokens/s to the first one's, with a confidence interval.

scripts/bench_spec_decode.py starts a fresh server per configuration and level and reports
medians of a few rounds; on a VM whose speed drifts by 10-25% within minutes (the 2-core EPYC
hosts: `none` alone read 173-247 tok/s at 1 request within three minutes), those ratios move by
as much. Here every configuration gets its own server, started once and kept warm (adaptive
speculation's guard learns as a long-running server's would); then each round sends the same
prompts (seed = round) to every server in turn, rotating the order, so drift hits every
configuration alike. The result is the geometric mean of the per-round ratios with a 95%
interval (two standard errors of the log ratios).

Add an A/A pair (`none= none_b=`, two identical servers) to see the method's own floor. Started
together, as this script used to start them, the second of two identical servers read 0.941x
(0.911-0.972) and 0.952x of the first at 1 request on a Zen 3 EPYC (bench/results/dspark_s27);
started one at a time in a rotated order, 1.009-1.016x. So the servers start one at a time, in an
order rotated per instance, and `--instances K` starts them afresh K times, `--rounds` rounds each,
taking the interval from the K per-instance mean log ratios (two standard errors over instances),
so that one set of servers' luck counts as the noise it is; with one instance (the default) the
interval is the per-round one.

  scripts/bench_spec_paired.py --concurrency 4 --instances 4 --rounds 3 --prompts 16 none= none_b= "dspark=$S"

  scripts/bench_spec_paired.py --concurrency 16 --rounds 8 --prompts 32 \\
      none= 'dspark={"method":"dspark","model":"tests/golden/dspark/smollm2","num_speculative_tokens":7}'

Each configuration is LABEL=SPECULATIVE_CONFIG_JSON (empty: no speculation). `--binary LABEL=PATH`
serves that configuration with another ember build (an A/B of a change: copy the binary before
rebuilding). `--peer LABEL=ARGS` adds a llama.cpp llama-server (`--llama-server PATH`, built
natively from source: scripts/build_llama_server.sh) serving the same GGUF with those extra
arguments in the same rounds, e.g. its own DSpark drafter converted by its converter:

  scripts/bench_spec_paired.py --concurrency 1 --llama-server PATH none= "dspark=$S" \\
      --peer llama_none= --peer "llama_dspark=-md DRAFTER.gguf --spec-type draft-dspark --spec-draft-n-max 3"

(DRAFTER.gguf: scripts/dspark/export_llamacpp_drafter.py, then llama.cpp's converter; a drafter
that taps the target's final-normed state also needs the llama.cpp change described in
bench/results/dspark_s26/README.md.)

Writes OUT/results.json and the servers' logs.
"""

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
from pathlib import Path

from bench_servers import free_port, stop, wait_ready

ROOT = Path(__file__).resolve().parent.parent
MODELS = Path(os.path.expanduser("~/.cache/ember/models"))


def run_instance(a, labels, specs, peers, binaries, instance, rates):
    """Starts a server per configuration, warms each, runs a.rounds paired rounds into `rates`,
    stops the servers."""
    # Servers start in an order rotated per instance: at 1 request the second of two identical
    # servers read ~5% slower than the first (an A/A pair, 0.941x and 0.952x in two runs), so the
    # start order must not stay with a configuration.
    start = [(instance + j) % len(labels) for j in range(len(labels))]
    procs, ports = [None] * len(labels), [0] * len(labels)
    try:
        for j in start:
            label, spec = labels[j], specs[j]
            ports[j] = free_port()
            env = None
            if label in peers:  # the same slots, context per slot and threads as the ember servers
                cmd = [str(a.llama_server), "-m", str(a.model), "--host", "127.0.0.1", "--port", str(ports[j]),
                       "--threads", str(a.threads), "--threads-batch", str(a.threads), "-np", str(a.concurrency),
                       "-c", str(a.concurrency * 2048), "--alias", "model", "--no-warmup", *shlex.split(spec)]
                env = os.environ | {"LD_LIBRARY_PATH": str(a.llama_server.parent)}
            else:
                cmd = [binaries.get(label, str(a.ember)), "serve", str(a.model), "--port", str(ports[j]),
                       "--threads", str(a.threads), "--max-num-seqs", str(a.concurrency), "--max-model-len", "2048",
                       "--served-model-name", "model"]
                if spec:
                    cmd += ["--speculative-config", spec]
            log = open(a.out / f"server_{label}_{instance}.log", "w")
            procs[j] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
            # One at a time: servers loading side by side would share the cores at startup, where
            # ember measures its step costs.
            wait_ready(f"http://127.0.0.1:{ports[j]}", procs[j])

        def bench(i: int, seed: int, n: int) -> float:
            out = a.out / "level.json"
            subprocess.run([str(a.ember), "bench", "serve", "--base-url", f"http://127.0.0.1:{ports[i]}",
                            "--model", "model", "--dataset", "jsonl", "--dataset-path", str(a.dataset),
                            "--output-len", str(a.output_len), "--num-prompts", str(n),
                            "--concurrency", str(a.concurrency), "--seed", str(seed), "--result-json", str(out)],
                           check=True, capture_output=True)
            level = json.loads(out.read_text())["levels"][0]
            if level["failed"]:
                raise SystemExit(f"{labels[i]}: {level['failed']} requests failed")
            return level["output_throughput"]

        for i in range(len(procs)):
            bench(i, 10_000, a.warmup or max(4, a.concurrency))  # warm-up, prompts no round uses
        for r in range(a.rounds):
            # Rounds of every instance take new prompts; the order rotates across all of them.
            g = instance * a.rounds + r
            order = list(range(len(procs)))
            order = order[g % len(order):] + order[:g % len(order)]
            for i in order:
                rates[labels[i]].append(bench(i, g, a.prompts))
            print(f"instance {instance} round {r}: " + "  ".join(f"{label} {rates[label][-1]:.1f}" for label in labels),
                  flush=True)
    finally:
        for p in procs:
            if p is not None:
                stop(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("configs", nargs="+", help="LABEL=SPECULATIVE_CONFIG_JSON; the first is the baseline")
    ap.add_argument("--ember", type=Path, default=ROOT / "build/release/tools/ember/ember")
    ap.add_argument("--binary", action="append", default=[], metavar="LABEL=PATH",
                    help="serve configuration LABEL with this ember binary instead of --ember")
    ap.add_argument("--peer", action="append", default=[], metavar="LABEL=ARGS",
                    help="a llama-server configuration (extra arguments, shell-quoted) in the same rounds")
    ap.add_argument("--llama-server", type=Path, default=Path(os.path.expanduser("~/.cache/ember/llama.cpp/bin/llama-server")))
    ap.add_argument("--model", type=Path, default=MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--dataset", type=Path, default=ROOT / "bench/datasets/dspark_chat.jsonl")
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=10, help="rounds per instance")
    ap.add_argument("--instances", type=int, default=1,
                    help="fresh servers this many times, --rounds rounds each; the interval is then over instances")
    ap.add_argument("--prompts", type=int, default=8, help="requests per round and configuration")
    ap.add_argument("--warmup", type=int, default=0,
                    help="warm-up requests per server before the rounds (0: max(4, concurrency)); a DSpark "
                         "server's pool of waiting-row buffers takes ~160 at 16 requests to stop faulting in pages")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench_spec_paired"))
    a = ap.parse_args()
    if a.instances < 1 or a.rounds < 1 or a.prompts < 1:
        raise SystemExit("--instances, --rounds and --prompts must be at least 1")
    a.out.mkdir(parents=True, exist_ok=True)

    labels, specs = zip(*(c.split("=", 1) for c in a.configs))
    peers = dict(c.split("=", 1) for c in a.peer)
    if len(peers) != len(a.peer) or set(peers) & set(labels) or len(set(labels)) != len(labels):
        raise SystemExit("every configuration and --peer needs a label of its own")
    labels, specs = labels + tuple(peers), specs + tuple(peers.values())
    binaries = dict(b.split("=", 1) for b in a.binary)
    if not set(binaries) <= set(labels) - set(peers):
        raise SystemExit(f"--binary names no ember configuration: {sorted(set(binaries) - (set(labels) - set(peers)))}")
    rates = {label: [] for label in labels}
    instance_of_round = []
    for instance in range(a.instances):
        run_instance(a, labels, specs, peers, binaries, instance, rates)
        instance_of_round += [instance] * a.rounds

    summary = {"concurrency": a.concurrency, "rounds": a.rounds, "instances": a.instances, "prompts": a.prompts,
               "rates": rates, "ratios": {}}
    # Every configuration against the first; each further peer also against the first peer (a
    # peer's own speculation against its own plain server).
    pairs = [(label, labels[0]) for label in labels[1:]]
    peer_labels = list(peers)
    pairs += [(label, peer_labels[0]) for label in peer_labels[1:]]
    for label, base in pairs:
        logs = [math.log(x / y) for x, y in zip(rates[label], rates[base])]
        # One sample per instance when there are several (rounds of one instance share its luck).
        samples = logs if a.instances == 1 else [
            statistics.mean(v for v, i in zip(logs, instance_of_round) if i == k) for k in range(a.instances)]
        mean = statistics.mean(samples)
        se = statistics.stdev(samples) / math.sqrt(len(samples)) if len(samples) > 1 else float("nan")
        ratio = {"geomean": math.exp(mean), "low": math.exp(mean - 2 * se), "high": math.exp(mean + 2 * se)}
        if a.instances > 1:
            ratio["per_instance"] = [math.exp(v) for v in samples]
        summary["ratios"][label if base == labels[0] else f"{label}/{base}"] = ratio
        spread = f"{a.rounds} rounds" if a.instances == 1 else f"{a.instances} instances x {a.rounds} rounds"
        print(f"{label} / {base} at {a.concurrency} requests: {ratio['geomean']:.3f}x "
              f"(95%: {ratio['low']:.3f}-{ratio['high']:.3f}), {statistics.mean(rates[label]):.1f} vs "
              f"{statistics.mean(rates[base]):.1f} tok/s mean over {spread}")
    (a.out / "results.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
