"""Prefill/decode disaggregation end to end: a producer (`--kv-transfer-config` kv_producer) prefills
with max_tokens 1 and holds the prompt's KV; a consumer (kv_consumer) gets the producer's
kv_transfer_params, pulls the KV over UCX and decodes. ember is batch invariant, so greedy outputs
must equal one colocated instance's exactly, for a dense GGUF model (SmolLM2), one with sliding-window
layers (Gemma 3, prompts past its 512-token window) and a Muse Spark golden model; and every fault
(producer gone, a hold nobody pulls, a client that leaves) ends without a hang and with every KV
block back in the pool on both sides."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from serving import GEMMA, SMOLLM, Server, free_port, with_byte_level_tokenizer

PROMPTS = [
    "The capital of France is",
    "Write a haiku about the sea.\n",
    "List three prime numbers: 2, 3,",
]


def kv_config(role, **extra):
    config = {"kv_connector": "UcxConnector", "kv_role": role, "kv_port": 0}
    if extra:
        config["kv_connector_extra_config"] = extra
    return json.dumps(config)


def prefill_phase(prefill, path, body):
    """What `ember router` sends the producer: one token, no streaming, hold the KV."""
    phase = dict(body, max_tokens=1, stream=False, n=1, kv_transfer_params={"do_remote_decode": True})
    phase.pop("stream_options", None)
    status, answer = prefill.json("POST", path, phase)
    assert status == 200, answer
    assert "kv_transfer_params" in answer, answer
    return answer["kv_transfer_params"]


def texts(status_payload, stream):
    status, payload = status_payload
    assert status == 200, payload
    if not stream:
        body = json.loads(payload)
        return [c.get("text", c.get("message", {}).get("content")) for c in body["choices"]]
    out = {}
    for line in payload.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        for c in chunk.get("choices", []):
            piece = c.get("text", c.get("delta", {}).get("content")) or ""
            out[c["index"]] = out.get(c["index"], "") + piece
    return [out[i] for i in sorted(out)]


def requests_for(model_name):
    """Completions and chat, streaming and not, n > 1 and a stop string."""
    bodies = []
    for i, prompt in enumerate(PROMPTS):
        bodies.append(("/v1/completions", {"model": model_name, "prompt": prompt, "max_tokens": 12,
                                           "temperature": 0, "stream": i == 1}))
    bodies.append(("/v1/chat/completions", {"model": model_name, "messages": [{"role": "user", "content": PROMPTS[1]}],
                                            "max_tokens": 12, "temperature": 0, "n": 2, "stop": ["\n\n"]}))
    bodies.append(("/v1/chat/completions", {"model": model_name, "messages": [{"role": "user", "content": PROMPTS[0]}],
                                            "max_tokens": 10, "temperature": 0, "stream": True}))
    return bodies


def assert_all_blocks_back(*servers):
    deadline = time.time() + 30
    while time.time() < deadline:
        if all(s.metric("ember:kv_cache_usage_perc") == 0 for s in servers):
            return
        time.sleep(0.2)
    for s in servers:
        assert s.metric("ember:kv_cache_usage_perc") == 0, s.port


def assert_sent_equals_received(producer, consumer):
    """The producer counts a send when UCX reports it complete, which can come after the consumer
    has the bytes (and its client the answer): wait a little for the two counters to agree."""
    deadline = time.time() + 10
    while time.time() < deadline:
        sent = producer.metric("ember:kv_transfer_sent_bytes_total")
        received = consumer.metric("ember:kv_transfer_received_bytes_total")
        if sent == received:
            return
        time.sleep(0.1)
    assert sent == received, (sent, received)


def check_disaggregated_equals_colocated(ember_bin, model, name, *args, bodies=None, prefix_caching=True):
    cache = [] if prefix_caching else ["--no-enable-prefix-caching"]
    colocated = Server(ember_bin, *args, *cache, model=model, name=name, max_model_len=1024)
    producer = Server(ember_bin, *args, *cache, "--kv-transfer-config", kv_config("kv_producer"), model=model,
                      name=name, max_model_len=1024)
    consumer = Server(ember_bin, *args, *cache, "--kv-transfer-config", kv_config("kv_consumer"), model=model,
                      name=name, max_model_len=1024)
    try:
        for path, body in bodies or requests_for(name):
            expected = texts(colocated.request("POST", path, body), body.get("stream", False))
            params = prefill_phase(producer, path, body)
            got = texts(consumer.request("POST", path, dict(body, kv_transfer_params=params)), body.get("stream", False))
            assert got == expected, (path, body, got, expected)
        # A pull that failed was computed locally, so the outputs above still match: say which.
        received = consumer.metric("ember:kv_transfer_received_total")
        failed = consumer.metric("ember:kv_transfer_pull_failures_total")
        assert failed == 0 and received >= len(bodies or requests_for(name)), (received, failed)
        assert_sent_equals_received(producer, consumer)
        assert_all_blocks_back(producer, consumer)
        return producer, consumer
    finally:
        for s in (colocated, producer, consumer):
            s.stop()


def test_smollm2_disaggregated_equals_colocated(ember_bin):
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (make models)")
    check_disaggregated_equals_colocated(ember_bin, SMOLLM, "smollm")


def test_every_choice_pulls_without_prefix_caching(ember_bin):
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (make models)")
    body = {"model": "smollm", "prompt": PROMPTS[2], "max_tokens": 8, "temperature": 0, "n": 3}
    check_disaggregated_equals_colocated(ember_bin, SMOLLM, "smollm", bodies=[("/v1/completions", body)],
                                         prefix_caching=False)


def test_gemma3_sliding_window_disaggregated_equals_colocated(ember_bin):
    """Prompts past Gemma 3's 512-token window: its sliding layers send only in-window blocks."""
    if not GEMMA.exists():
        pytest.skip("Gemma 3 not fetched (make models)")
    long_prompt = " ".join(f"item {i} is {i * 7 % 13}." for i in range(90))
    bodies = [("/v1/completions", {"model": "gemma", "prompt": long_prompt + " So item 3 is", "max_tokens": 8,
                                   "temperature": 0}),
              ("/v1/completions", {"model": "gemma", "prompt": PROMPTS[0], "max_tokens": 8, "temperature": 0,
                                   "stream": True})]
    check_disaggregated_equals_colocated(ember_bin, GEMMA, "gemma", bodies=bodies)


def test_muse_spark_disaggregated_equals_colocated(ember_bin, golden_dir, tmp_path):
    model = with_byte_level_tokenizer(golden_dir / "tiny_a", tmp_path)
    bodies = [("/v1/completions", {"model": "muse", "prompt": "abcdefghij" * 5, "max_tokens": 10, "temperature": 0}),
              ("/v1/completions", {"model": "muse", "prompt": "hello world", "max_tokens": 10, "temperature": 0,
                                   "stream": True})]
    check_disaggregated_equals_colocated(ember_bin, model, "muse", "--kv-cache-dtype", "f32", bodies=bodies)


def test_a_prefix_cached_on_the_consumer_is_not_transferred_again(ember_bin):
    """Token-id prompts for exact lengths (blocks of 16): the second request of the same 100 ids
    finds 96 positions in the consumer's prefix cache and pulls only the 3 after them; a request of
    their first 97 ids finds all 96 held positions cached, pulls nothing and tells the producer,
    which frees the KV at once rather than after hold_timeout_s."""
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (make models)")
    producer = Server(ember_bin, "--kv-transfer-config", kv_config("kv_producer"))
    consumer = Server(ember_bin, "--kv-transfer-config", kv_config("kv_consumer"))
    try:
        ids = list(range(1000, 1100))
        body = {"model": "smollm", "prompt": ids, "max_tokens": 4, "temperature": 0}
        first = prefill_phase(producer, "/v1/completions", body)
        assert consumer.json("POST", "/v1/completions", dict(body, kv_transfer_params=first))[0] == 200
        whole = consumer.metric("ember:kv_transfer_received_bytes_total")
        assert whole == first["num_bytes"]
        second = prefill_phase(producer, "/v1/completions", body)
        assert consumer.json("POST", "/v1/completions", dict(body, kv_transfer_params=second))[0] == 200
        again = consumer.metric("ember:kv_transfer_received_bytes_total") - whole
        assert again == whole * 3 // 99, (again, whole)
        shorter = dict(body, prompt=ids[:97])
        third = prefill_phase(producer, "/v1/completions", shorter)
        start = time.time()
        assert consumer.json("POST", "/v1/completions", dict(shorter, kv_transfer_params=third))[0] == 200
        assert consumer.metric("ember:kv_transfer_received_bytes_total") == whole + again
        assert_all_blocks_back(producer, consumer)
        assert time.time() - start < 10 and producer.metric("ember:kv_transfer_holds_expired_total") == 0
    finally:
        producer.stop()
        consumer.stop()


def test_faults_end_without_hangs_and_free_every_block(ember_bin):
    """The producer killed after its phase (the consumer computes the prompt itself, same answer);
    KV nobody pulls (freed after hold_timeout_s); a client that leaves mid-stream on the consumer;
    a kv_transfer_params the consumer cannot use (another prompt's: computed here)."""
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (make models)")
    colocated = Server(ember_bin)
    producer = Server(ember_bin, "--kv-transfer-config", kv_config("kv_producer", hold_timeout_s=2))
    consumer = Server(ember_bin, "--kv-transfer-config", kv_config("kv_consumer", pull_timeout_s=5,
                                                                   connect_timeout_s=2))
    try:
        body = {"model": "smollm", "prompt": PROMPTS[0], "max_tokens": 12, "temperature": 0}
        expected = texts(colocated.request("POST", "/v1/completions", body), False)

        # Held, never pulled: freed after 2 s.
        prefill_phase(producer, "/v1/completions", body)
        assert producer.metric("ember:kv_transfer_held_requests") == 1
        assert_all_blocks_back(producer)
        assert producer.metric("ember:kv_transfer_holds_expired_total") == 1

        # Another prompt's KV: never pulled, computed here.
        params = prefill_phase(producer, "/v1/completions", body)
        other = dict(body, prompt=PROMPTS[2])
        status, answer = consumer.json("POST", "/v1/completions", dict(other, kv_transfer_params=params))
        assert status == 200 and consumer.metric("ember:kv_transfer_received_total") == 0, answer

        # A client leaving mid-stream on the consumer.
        params = prefill_phase(producer, "/v1/completions", body)
        streamed = dict(body, stream=True, max_tokens=200, ignore_eos=True, kv_transfer_params=params)
        raw = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(json.dumps(streamed))}\r\n\r\n{json.dumps(streamed)}").encode()
        with socket.create_connection(("127.0.0.1", consumer.port), timeout=30) as sock:
            sock.sendall(raw)
            sock.recv(4096)  # the first chunk came: leave
        assert_all_blocks_back(consumer)

        # The producer stopped (SIGSTOP: it hangs, connection open) when the consumer pulls: the pull
        # times out (pull_timeout_s 5) and the consumer computes the prompt itself.
        params = prefill_phase(producer, "/v1/completions", body)
        producer.proc.send_signal(signal.SIGSTOP)
        start = time.time()
        try:
            got = texts(consumer.request("POST", "/v1/completions", dict(body, kv_transfer_params=params)), False)
        finally:
            producer.proc.send_signal(signal.SIGCONT)
        assert got == expected
        assert time.time() - start < 20
        assert_all_blocks_back(consumer)

        # The producer killed after its phase: the consumer computes the prompt itself.
        params = prefill_phase(producer, "/v1/completions", body)
        producer.proc.kill()
        producer.proc.wait()
        start = time.time()
        got = texts(consumer.request("POST", "/v1/completions", dict(body, kv_transfer_params=params)), False)
        assert got == expected
        assert time.time() - start < 15
        assert consumer.metric("ember:kv_transfer_pull_failures_total") >= 1
        assert_all_blocks_back(consumer)
        consumer.assert_idle_and_healthy()
    finally:
        for s in (colocated, producer, consumer):
            s.stop()


def test_refusals(ember_bin):
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (make models)")
    plain = Server(ember_bin)
    try:
        status, answer = plain.json("POST", "/v1/completions", {"model": "smollm", "prompt": "hi", "max_tokens": 1,
                                                                 "kv_transfer_params": {"do_remote_decode": True}})
        assert status == 400 and "kv-transfer-config" in json.dumps(answer), answer
        status, answer = plain.json("POST", "/v1/completions", {"model": "smollm", "prompt": "hi", "max_tokens": 1,
                                                                 "kv_transfer_params": {"do_remote_prefill": True}})
        assert status == 400 and "remote_host" in json.dumps(answer), answer
    finally:
        plain.stop()
    bad = subprocess.run([str(ember_bin), "serve", str(SMOLLM), "--kv-transfer-config",
                          '{"kv_connector":"UcxConnector","kv_role":"decode"}'], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode != 0 and "kv_role" in bad.stderr, bad.stderr
    tp = subprocess.run([str(ember_bin), "generate", "--model", str(SMOLLM), "--prompt", "hi", "--max-tokens", "1",
                         "--pipeline-parallel-size", "2", "--kv-transfer-config", kv_config("kv_producer")],
                        capture_output=True, text=True, timeout=120)
    assert tp.returncode != 0 and "single-process" in tp.stderr, tp.stderr[-2000:]


def in_namespace(ns, code):
    """Runs a Python snippet inside a network namespace (the test client on that "host")."""
    out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_producer_and_consumer_in_two_network_namespaces(ember_bin, two_hosts):
    """Producer on "host" 10.77.0.1, consumer on 10.77.0.2, UCX over TCP on the veth pair (UCX_TLS
    keeps it from taking shared memory, which namespaces on one machine would still allow)."""
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (make models)")
    hosts, links = two_hosts
    (first, ns0), (second, ns1) = hosts.items()
    colocated = Server(ember_bin)
    body = {"model": "smollm", "prompt": PROMPTS[1], "max_tokens": 12, "temperature": 0}
    expected = texts(colocated.request("POST", "/v1/completions", body), False)
    colocated.stop()
    env = dict(os.environ, UCX_TLS="tcp")
    procs = []
    ports = {first: free_port(), second: free_port()}
    try:
        for (address, ns), role in zip(hosts.items(), ["kv_producer", "kv_consumer"]):
            config = json.dumps({"kv_connector": "UcxConnector", "kv_role": role, "kv_ip": address, "kv_port": 0})
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, str(ember_bin), "serve", str(SMOLLM), "--host", address, "--port",
                 str(ports[address]), "--served-model-name", "smollm", "--max-model-len", "512", "--kv-cache-memory",
                 "64MiB", "--kv-transfer-config", config], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                text=True))
        client = f"""
import json, time, urllib.request
def post(host, port, body):
    req = urllib.request.Request(f"http://{{host}}:{{port}}/v1/completions", json.dumps(body).encode(),
                                 {{"Content-Type": "application/json"}})
    return json.load(urllib.request.urlopen(req, timeout=60))
for host, port in [("{first}", {ports[first]}), ("{second}", {ports[second]})]:
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://{{host}}:{{port}}/health", timeout=2); break
        except Exception: time.sleep(0.2)
body = {json.dumps(body)}
p = post("{first}", {ports[first]}, dict(body, max_tokens=1, kv_transfer_params={{"do_remote_decode": True}}))
d = post("{second}", {ports[second]}, dict(body, kv_transfer_params=p["kv_transfer_params"]))
print(json.dumps({{"params": p["kv_transfer_params"], "text": d["choices"][0]["text"]}}))
"""
        result = json.loads(in_namespace(ns0, client).strip().splitlines()[-1])
        assert result["params"]["remote_host"] == first
        assert [result["text"]] == expected
        metrics = in_namespace(ns0, f"import urllib.request; print(urllib.request.urlopen("
                                    f"'http://{second}:{ports[second]}/metrics').read().decode())")
        received = [line for line in metrics.splitlines() if line.startswith("ember:kv_transfer_received_bytes_total")]
        assert received and float(received[0].rsplit(" ", 1)[1]) == result["params"]["num_bytes"], received
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def test_router_in_front_of_real_instances_equals_colocated(ember_bin):
    """`ember router` before a producer and a consumer: completions and chat, streaming and not,
    n > 1 and a stop string give what one colocated instance gives; its metrics count the KV bytes
    the producer held; a client leaving mid-stream leaves no block held on either side."""
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (make models)")
    from test_router import Router  # noqa: PLC0415  (its helper; that file runs as e2e_router)
    colocated = Server(ember_bin)
    producer = Server(ember_bin, "--kv-transfer-config", kv_config("kv_producer"))
    consumer = Server(ember_bin, "--kv-transfer-config", kv_config("kv_consumer"))
    router = Router(ember_bin, [f"http://127.0.0.1:{producer.port}"], [f"http://127.0.0.1:{consumer.port}"])
    try:
        for path, body in requests_for("smollm"):
            expected = texts(colocated.request("POST", path, body), body.get("stream", False))
            status, _, payload = router.post(path, body)
            assert texts((status, payload), body.get("stream", False)) == expected, (path, body, payload)
        assert router.metric("ember_router:fallbacks_total") == 0
        # The router counts what the producers held (num_bytes); the consumer's prefix cache made
        # some pulls smaller than that.
        assert router.metric("ember_router:kv_transfer_bytes_total") >= producer.metric(
            "ember:kv_transfer_sent_bytes_total") > 0
        streamed = {"model": "smollm", "prompt": PROMPTS[0], "max_tokens": 200, "ignore_eos": True, "stream": True}
        conn = router.connect()
        conn.request("POST", "/v1/completions", json.dumps(streamed), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.readline()  # the first event came: leave
        conn.sock.close()
        assert_all_blocks_back(producer, consumer)

        # The consumer killed mid-decode: the client's stream ends with an error event, no hang;
        # the producer's KV was pulled and freed.
        conn = router.connect(timeout=30)
        conn.request("POST", "/v1/completions", json.dumps(streamed), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.readline()
        consumer.proc.kill()
        rest = b""
        while line := resp.readline():
            rest += line
        rest = rest.decode()
        assert '"error"' in rest and rest.rstrip().endswith("data: [DONE]"), rest[-500:]
        assert_all_blocks_back(producer)
    finally:
        router.stop()
        for s in (colocated, producer, consumer):
            s.stop()
