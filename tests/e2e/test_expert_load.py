"""Expert load end to end on the tiny Muse Spark model (tests/golden/muse_spark/tiny_a: 6 MoE
layers, 8 experts, top-2) served by `ember serve`: after requests, /metrics holds one
ember:expert_tokens_total series per layer and expert, and each layer's series sum to the tokens
the engine computed times top_k; --expert-placement adds per-rank series that add up to the same;
a placement that does not fit the model stops the server at startup; --expert-load-metrics off
removes the series. tiny_a has no tokenizer, so the test gives its directory a byte-level one."""
import json
import re

import pytest

from serving import Server, with_byte_level_tokenizer

TOP_K, EXPERTS, LAYERS = 2, 8, 6


@pytest.fixture(scope="module")
def tiny_dir(golden_dir, tmp_path_factory):
    return with_byte_level_tokenizer(golden_dir / "tiny_a", tmp_path_factory.mktemp("tiny_a_served"))


def serve(ember_bin, tiny_dir, *args):
    return Server(ember_bin, "--threads", "1", "--no-enable-prefix-caching", "--kv-cache-dtype", "f32", *args,
                  model=tiny_dir, name="tiny", max_model_len=128)


def complete(server, prompts, max_tokens):
    """Greedy completions of token-id prompts; returns the tokens the engine computed: each
    request's prompt and every output token but the last (never fed back)."""
    computed = 0
    for prompt in prompts:
        status, body = server.json("POST", "/v1/completions", {"model": "tiny", "prompt": prompt, "temperature": 0,
                                                                "max_tokens": max_tokens, "ignore_eos": True})
        assert status == 200, body
        usage = body["usage"]
        assert usage["prompt_tokens"] == len(prompt) and usage["completion_tokens"] == max_tokens
        computed += usage["prompt_tokens"] + usage["completion_tokens"] - 1
    return computed


def series(server, name, label):
    """{(layer, label value): value} of one metric family."""
    _, text = server.request("GET", "/metrics")
    pattern = re.compile(rf'^{re.escape(name)}\{{model_name="tiny",layer="(\d+)"(?:,{label}="(\d+)")?\}} (\S+)$')
    out = {}
    for line in text.splitlines():
        m = pattern.match(line)
        if m:
            out[(int(m.group(1)), int(m.group(2)) if m.group(2) else None)] = float(m.group(3))
    return out


def per_layer_sums(values):
    sums = {}
    for (layer, _), v in values.items():
        sums[layer] = sums.get(layer, 0) + v
    return sums


def test_metrics_count_every_token_top_k_times_per_layer(ember_bin, tiny_dir):
    server = serve(ember_bin, tiny_dir)
    try:
        assert series(server, "ember:expert_tokens_total", "expert") == {}  # nothing computed yet
        computed = complete(server, [[1, 2, 3, 4, 5], list(range(10, 47)), [7] * 12], max_tokens=6)
        counts = series(server, "ember:expert_tokens_total", "expert")
        assert sorted(counts) == [(layer, e) for layer in range(LAYERS) for e in range(EXPERTS)]
        assert per_layer_sums(counts) == {layer: computed * TOP_K for layer in range(LAYERS)}
        imbalance = series(server, "ember:expert_load_imbalance", "none")
        for layer in range(LAYERS):
            row = [counts[(layer, e)] for e in range(EXPERTS)]
            assert imbalance[(layer, None)] == pytest.approx(max(row) * EXPERTS / sum(row))
        assert series(server, "ember:expert_parallel_rank_tokens_total", "rank") == {}  # no placement given
        # More requests: the counters only grow, by exactly the new tokens.
        more = complete(server, [[3, 1, 4, 1, 5, 9, 2, 6]], max_tokens=4)
        assert per_layer_sums(series(server, "ember:expert_tokens_total", "expert")) == {
            layer: (computed + more) * TOP_K for layer in range(LAYERS)}
    finally:
        assert server.stop() == 0


def test_placement_adds_rank_series_and_a_bad_one_is_refused(ember_bin, tiny_dir, tmp_path):
    placement = tmp_path / "placement.json"
    placement.write_text(json.dumps({"num_experts": EXPERTS, "ep_size": 2, "num_layers": LAYERS,
                                     "layers": {"2": [1, 0, 1, 0, 1, 0, 1, 0]}}))
    server = serve(ember_bin, tiny_dir, "--expert-placement", placement)
    try:
        computed = complete(server, [list(range(1, 30)), [5, 4, 3]], max_tokens=5)
        counts = series(server, "ember:expert_tokens_total", "expert")
        ranks = series(server, "ember:expert_parallel_rank_tokens_total", "rank")
        assert sorted(ranks) == [(layer, r) for layer in range(LAYERS) for r in range(2)]
        for layer in range(LAYERS):
            owner = [1, 0, 1, 0, 1, 0, 1, 0] if layer == 2 else [0, 0, 0, 0, 1, 1, 1, 1]
            for r in range(2):
                assert ranks[(layer, r)] == sum(counts[(layer, e)] for e in range(EXPERTS) if owner[e] == r)
            assert ranks[(layer, 0)] + ranks[(layer, 1)] == computed * TOP_K
    finally:
        assert server.stop() == 0
    placement.write_text(json.dumps({"num_experts": 16, "ep_size": 2}))
    with pytest.raises(AssertionError, match="the expert placement is for 16 experts per layer, the model has 8"):
        serve(ember_bin, tiny_dir, "--expert-placement", placement)


def test_expert_load_metrics_off(ember_bin, tiny_dir):
    server = serve(ember_bin, tiny_dir, "--expert-load-metrics", "off")
    try:
        complete(server, [[1, 2, 3]], max_tokens=2)
        _, text = server.request("GET", "/metrics")
        assert "ember:generation_tokens_total" in text and "expert" not in text
    finally:
        assert server.stop() == 0
