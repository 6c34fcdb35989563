#!/usr/bin/env python3
"""ember vs llama.cpp, side by side in one run: prompt processing (pp) and generation (tg) tokens/s
on the same GGUF with the same thread count.

Both engines measure the same thing, the way llama-bench does:
  pp N  one decode call of N prompt tokens into an empty KV cache, logits of the last token only;
  tg N  N decode calls of one token each, starting from an empty KV cache, no sampling.
ember runs `ember bench --model F --pp N --tg N --reps R --threads T --json` (which times exactly
that in-process, after an untimed warm-up); llama.cpp runs through llama-cpp-python's low-level API
(llama_decode on llama_batch_get_one batches, n_threads = n_threads_batch = T, n_batch = n_ubatch =
N, KV cleared before each run, one untimed warm-up per context). The machine is shared and noisy,
so the engines alternate (the order flips every round) and each (model, threads, engine) gets
--rounds x --reps timed runs; the report gives best and median tokens/s and ember/llama.cpp ratios,
per wall-clock second and per process CPU-second (with one thread the CPU-time rate is what the run
would do with the core to itself: preemption by other processes costs wall time, not CPU time; with
more threads it counts spinning workers too, so read it with care).

  .venv/bin/python scripts/bench_vs_llamacpp.py [--model all] [--threads 1,2] [--rounds 5]
      [--out bench/results/bench_vs_llamacpp.json]
"""
import argparse
import ctypes
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHE = pathlib.Path(os.environ.get("EMBER_MODEL_CACHE", pathlib.Path.home() / ".cache/ember/models"))
MODELS = {
    "smollm2": CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": CACHE / "gemma-3-270m-q4_k_m.gguf",
}
KV_TYPES = {"f16": 1, "f32": 0}  # ggml_type values


class LlamaBench:
    """One llama.cpp context for one (model, thread count), timed through the C API."""

    def __init__(self, llama_cpp, path, threads, pp, tg, kv_type):
        self.l = llama_cpp
        mparams = llama_cpp.llama_model_default_params()
        self.model = llama_cpp.llama_model_load_from_file(str(path).encode(), mparams)
        if not self.model:
            sys.exit(f"llama.cpp could not load {path}")
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = pp + tg + 16
        cparams.n_batch = cparams.n_ubatch = max(pp, 1)
        cparams.n_threads = cparams.n_threads_batch = threads
        cparams.type_k = cparams.type_v = KV_TYPES[kv_type]
        cparams.no_perf = True
        self.ctx = llama_cpp.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            sys.exit(f"llama.cpp could not make a context for {path}")
        vocab = llama_cpp.llama_n_vocab(llama_cpp.llama_model_get_vocab(self.model))
        n = max(pp, tg)
        # The same kind of ids as ember bench's: a fixed pseudo-random walk over the vocabulary.
        state, ids = 0x9E3779B97F4A7C15, []
        for _ in range(n):
            state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            ids.append((state >> 33) % vocab)
        self.tokens = (llama_cpp.llama_token * n)(*ids)
        self.pp, self.tg = pp, tg
        self.run_pp(pp)  # warm-up: pages in the weights, sizes the compute buffers
        self.run_tg(min(tg, 4))

    def clear(self):
        self.l.llama_memory_clear(self.l.llama_get_memory(self.ctx), True)

    def decode(self, offset, count):
        ptr = ctypes.cast(ctypes.byref(self.tokens, offset * ctypes.sizeof(self.l.llama_token)),
                          ctypes.POINTER(self.l.llama_token))
        if self.l.llama_decode(self.ctx, self.l.llama_batch_get_one(ptr, count)) != 0:
            sys.exit("llama_decode failed")

    def run_pp(self, count):
        """(wall seconds, process CPU seconds) of one pp run."""
        self.clear()
        start, cpu = time.perf_counter(), time.process_time()
        self.decode(0, count)
        self.l.llama_synchronize(self.ctx)
        return time.perf_counter() - start, time.process_time() - cpu

    def run_tg(self, count):
        self.clear()
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(count):
            self.decode(i, 1)
            self.l.llama_synchronize(self.ctx)
        return time.perf_counter() - start, time.process_time() - cpu

    def close(self):
        self.l.llama_free(self.ctx)
        self.l.llama_model_free(self.model)


def ember_run(ember, path, threads, pp, tg, reps):
    cmd = [str(ember), "bench", "--model", str(path), "--pp", str(pp), "--tg", str(tg), "--reps", str(reps),
           "--threads", str(threads), "--json"]
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    return {f"{test}{kind}": out[test][key] for test in ("pp", "tg")
            for kind, key in (("", "tokens_per_second"), ("_cpu", "tokens_per_cpu_second"))}


def stats(values):
    return {"runs": values, "best": max(values), "median": statistics.median(values)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=[*MODELS, "all"], default="all")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--pp", type=int, default=512)
    parser.add_argument("--tg", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5, help="alternating ember/llama.cpp rounds")
    parser.add_argument("--reps", type=int, default=1, help="timed runs per engine per round")
    parser.add_argument("--llama-kv-type", choices=KV_TYPES, default="f16", help="llama.cpp's KV type (its default: f16)")
    parser.add_argument("--ember", default=str(ROOT / "build/release/tools/ember/ember"))
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "bench/results/bench_vs_llamacpp.json")
    args = parser.parse_args()
    import llama_cpp  # noqa: the peer, imported only when needed

    llama_cpp.llama_backend_init()
    threads_list = [int(t) for t in args.threads.split(",")]
    names = list(MODELS) if args.model == "all" else [args.model]
    results = []
    for name in names:
        path = MODELS[name]
        if not path.exists():
            sys.exit(f"{path} is missing: run scripts/fetch_models.py --model {name}")
        for threads in threads_list:
            ref = LlamaBench(llama_cpp, path, threads, args.pp, args.tg, args.llama_kv_type)
            tests = ("pp", "tg", "pp_cpu", "tg_cpu")
            runs = {"ember": {t: [] for t in tests}, "llama_cpp": {t: [] for t in tests}}
            for r in range(args.rounds):
                order = ["ember", "llama_cpp"] if r % 2 == 0 else ["llama_cpp", "ember"]
                for engine in order:
                    if engine == "ember":
                        got = ember_run(args.ember, path, threads, args.pp, args.tg, args.reps)
                    else:
                        got = {t: [] for t in tests}
                        for _ in range(args.reps):
                            for test, n, run in (("pp", args.pp, ref.run_pp), ("tg", args.tg, ref.run_tg)):
                                wall, cpu = run(n)
                                got[test].append(n / wall)
                                got[test + "_cpu"].append(n / cpu)
                    for t in tests:
                        runs[engine][t] += got[t]
                print(f"{name} t{threads} round {r + 1}/{args.rounds}: "
                      + ", ".join(f"{e} " + " ".join(f"{t} {runs[e][t][-1]:.1f}" for t in tests) for e in runs),
                      file=sys.stderr, flush=True)
            ref.close()
            row = {"model": name, "gguf": path.name, "threads": threads}
            for test in tests:
                e, l = stats(runs["ember"][test]), stats(runs["llama_cpp"][test])
                row[test] = {"ember": e, "llama_cpp": l, "ratio_best": e["best"] / l["best"],
                             "ratio_median": e["median"] / l["median"]}
            results.append(row)

    report = {"pp": args.pp, "tg": args.tg, "rounds": args.rounds, "reps": args.reps,
              "llama_cpp": f"llama-cpp-python {llama_cpp.__version__}", "llama_cpp_kv_type": args.llama_kv_type,
              "ember_kv_type": "f32", "machine": platform.processor() or platform.machine(),
              "cpu_count": os.cpu_count(), "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\n| model | threads | test | per | ember best | llama.cpp best | ratio (best) | ember median | llama.cpp median | ratio (median) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in results:
        for test, n in (("pp", args.pp), ("tg", args.tg)):
            for key, per in ((test, "wall s"), (test + "_cpu", "CPU s")):
                t = row[key]
                print(f"| {row['model']} | {row['threads']} | {test}{n} | {per} | {t['ember']['best']:.1f} | "
                      f"{t['llama_cpp']['best']:.1f} | {t['ratio_best']:.2f} | {t['ember']['median']:.1f} | "
                      f"{t['llama_cpp']['median']:.1f} | {t['ratio_median']:.2f} |")
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
