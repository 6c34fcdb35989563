"""A live `ember serve` on loopback for the end-to-end suites: start it on a free port, wait for
/health, send requests (JSON, raw bytes), read metrics, stop it with SIGTERM. Its stdout and stderr
go to a log file (`Server.log()`), never to a pipe nobody reads: a server that logs more than a pipe
holds would block on its next line. conftest.py prints the logs' tails when a test fails."""
import http.client
import json
import os
import pathlib
import signal
import socket
import subprocess
import tempfile
import time

CACHE = pathlib.Path(os.environ.get("EMBER_MODEL_CACHE", pathlib.Path.home() / ".cache/ember/models"))
SMOLLM = CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA = CACHE / "gemma-3-270m-q4_k_m.gguf"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    started = []  # every Server this pytest process made, in order (conftest.py reports and removes their logs)

    def __init__(self, ember_bin, *args, model=SMOLLM, name="smollm", max_model_len=512):
        # free_port() hands out a port that another test running beside this one (ctest -j) may
        # take before the server binds it: then start again on another port.
        for attempt in range(3):
            self.port = free_port()
            log, self.log_path = tempfile.mkstemp(prefix=f"ember-serve-{self.port}-", suffix=".log")
            with os.fdopen(log, "wb") as out:
                self.proc = subprocess.Popen(
                    [str(ember_bin), "serve", str(model), "--port", str(self.port), "--served-model-name", name,
                     "--max-model-len", str(max_model_len), "--kv-cache-memory", "64MiB", *map(str, args)],
                    stdout=out, stderr=subprocess.STDOUT)
            stderr = self._wait_healthy()
            if stderr is None:
                Server.started.append(self)
                return
            os.unlink(self.log_path)  # this attempt's; its text is in stderr
            if "Address already in use" not in stderr or attempt == 2:
                raise AssertionError(f"ember serve exited: {stderr}")

    def log(self):
        """What the server wrote to stdout and stderr so far (all of it once it has exited)."""
        return pathlib.Path(self.log_path).read_text(errors="replace")

    def _wait_healthy(self):
        """None once /health answers 200 from this process; its log if it exited first."""
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                return self.log()
            try:
                if self.request("GET", "/health")[0] == 200:
                    return None
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError("ember serve did not become healthy")

    def request(self, method, path, body=None, headers=None, raw=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        payload = resp.read().decode()
        conn.close()
        return resp.status, payload

    def json(self, method, path, body=None, headers=None):
        status, payload = self.request(method, path, body, headers)
        return status, json.loads(payload) if payload else None

    def metric(self, name):
        _, text = self.request("GET", "/metrics")
        for line in text.splitlines():
            if line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        raise KeyError(name)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise
        return self.proc.returncode

    def raw(self, data, timeout=30):
        """Sends `data` (bytes, any of them) on a fresh connection and reads the first response
        (up to its Content-Length, or until the server closes); returns (status, headers, body),
        status 0 when the server closed without answering."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            sock.sendall(data)
            received = b""
            while True:
                head, sep, body = received.partition(b"\r\n\r\n")
                if sep:
                    lines = head.decode("latin-1").split("\r\n")
                    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
                    length = int(headers.get("content-length", -1))
                    if 0 <= length <= len(body):
                        return int(lines[0].split()[1]), headers, body[:length]
                chunk = sock.recv(65536)
                if not chunk:
                    return (int(lines[0].split()[1]), headers, body) if sep else (0, {}, b"")
                received += chunk

    def assert_idle_and_healthy(self):
        """After hostile traffic: the process lives, /health is 200, nothing runs or waits."""
        assert self.proc.poll() is None, self.log()
        assert self.request("GET", "/health")[0] == 200
        deadline = time.time() + 30
        while time.time() < deadline and (self.metric("ember:num_requests_running") or
                                          self.metric("ember:num_requests_waiting")):
            time.sleep(0.2)
        assert self.metric("ember:num_requests_running") == 0
        assert self.metric("ember:num_requests_waiting") == 0


def byte_level_tokenizer(vocab_size):
    """A GPT-2 byte-level BPE tokenizer.json with exactly `vocab_size` tokens: the 256 bytes, then
    two-letter merges of 'a'..'p' (enough for 512)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    vocab = {chars[b]: b for b in range(256)}
    letters = "abcdefghijklmnop"
    merges = []
    for left in letters:
        for right in letters:
            if len(vocab) == vocab_size:
                break
            vocab[left + right] = len(vocab)
            merges.append(f"{left} {right}")
    return {"version": "1.0", "added_tokens": [], "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "post_processor": None, "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "vocab": vocab, "merges": merges}}


def with_byte_level_tokenizer(model_dir, dest):
    """`dest` made a servable copy of a tokenizer-less golden Muse Spark directory: its files linked,
    plus a byte-level tokenizer.json of the model's vocabulary (512 for the tiny models)."""
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        if (model_dir / name).exists():
            (dest / name).symlink_to(model_dir / name)
    config = json.loads((model_dir / "config.json").read_text())
    vocab = config.get("text_config", config)["vocab_size"]
    (dest / "tokenizer.json").write_text(json.dumps(byte_level_tokenizer(vocab)))
    return dest
