"""Multimodal chat end to end: the openai client sends images, audio and video (data: URLs and
file:// URLs under --allowed-local-media-path, http:// URLs from --allowed-media-domains, streaming
and not) to `ember serve` on the tiny
multimodal Muse Spark of tests/golden/muse_spark_mm, and gets exactly the tokens transformers'
processor and generate() produced for the same media (scripts/make_muse_mm_e2e.py; greedy, f32 KV,
so every step's top-1 must match: cases.json records the smallest top-1/top-2 gap). A repeated
image is encoded once and reuses its prompt's KV; another image with the same prompt does not.
Hostile media (corrupt, truncated, empty, oversized, too many, outside the allowed path) are 400s
and the server keeps serving."""
import base64
import functools
import http.server
import json
import pathlib
import shutil
import subprocess
import threading

import pytest

from serving import Server

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "tests/golden/muse_spark_mm"
MEDIA = ROOT / "tests/unit/media/testdata"
CASES = {c["name"]: c for c in json.loads((MODEL / "cases.json").read_text())["cases"]}
TOKENIZER = json.loads((MODEL / "tokenizer.json").read_text())
IDS = {t["content"]: t["id"] for t in TOKENIZER["added_tokens"]}


def byte_level_ids():
    """Token bytes -> id for the fixture's byte-level vocabulary (GPT-2's byte-to-character map)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    char_to_byte, extra = {}, 0
    for b in range(256):
        char_to_byte[chr(b) if b in printable else chr(256 + extra)] = b
        extra += b not in printable
    ids = {bytes(char_to_byte[c] for c in piece): i for piece, i in TOKENIZER["model"]["vocab"].items()
           if piece not in IDS}
    ids.update({text.encode(): i for text, i in IDS.items()})
    return ids


BYTES_TO_ID = byte_level_ids()
MIME = {".png": "image/png", ".jpg": "image/jpeg", ".wav": "audio/wav", ".mp4": "video/mp4"}


def data_url(path):
    return f"data:{MIME.get(path.suffix, 'application/octet-stream')};base64," + base64.b64encode(path.read_bytes()).decode()


def api_part(part, url_of=data_url):
    if part["type"] == "text":
        return part
    path = MEDIA / part["file"]
    if part["type"] == "image":
        return {"type": "image_url", "image_url": {"url": url_of(path)}}
    if part["type"] == "video":
        return {"type": "video_url", "video_url": {"url": url_of(path)}}
    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(path.read_bytes()).decode(), "format": "wav"}}


def chat(case, url_of=data_url):
    return {"model": "mm", "messages": [{"role": "user", "content": [api_part(p, url_of) for p in case["content"]]}],
            "max_tokens": len(case["output_ids"]), "temperature": 0, "logprobs": True}


@pytest.fixture(scope="module")
def media_dir(tmp_path_factory):
    allowed = tmp_path_factory.mktemp("allowed_media")
    for name in ("rgb_odd.png", "tall.jpg"):
        shutil.copy(MEDIA / name, allowed / name)
    (allowed / "escape.png").symlink_to(MEDIA / "wide.png")  # inside the directory, pointing out of it
    return allowed


@pytest.fixture(scope="module")
def media_http(tmp_path_factory):
    """The test media, and a file over --max-media-bytes, over HTTP on a loopback port (the server
    may fetch from 127.0.0.1 only)."""
    served = tmp_path_factory.mktemp("served_media")
    for path in MEDIA.iterdir():
        (served / path.name).symlink_to(path)
    (served / "huge.png").write_bytes(bytes(2 << 20))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def server(ember_bin, media_dir, media_http):
    s = Server(ember_bin, "--kv-cache-dtype", "f32", "--allowed-local-media-path", media_dir,
               "--allowed-media-domains", "127.0.0.1", "--media-fetch-timeout", "5",
               "--limit-mm-per-prompt", '{"image": 2, "video": 1, "audio": 1}', "--max-media-bytes", "1MiB",
               model=MODEL, name="mm", max_model_len=2048)
    yield s
    s.stop()


def complete(server, body):
    status, answer = server.json("POST", "/v1/chat/completions", body)
    assert status == 200, answer
    return answer


def output_ids(answer):
    """The reply's token ids: logprobs give each token's bytes, which the byte-level vocabulary
    maps back one to one (special tokens included, which the text may leave out)."""
    return [BYTES_TO_ID[bytes(entry["bytes"])] for entry in answer["choices"][0]["logprobs"]["content"]]


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_tokens_as_transformers(server, name):
    case = CASES[name]
    answer = complete(server, chat(case))
    assert answer["usage"]["prompt_tokens"] == len(case["prompt_ids"]), answer["usage"]
    assert output_ids(answer) == case["output_ids"]


def test_tokenize_expands_media_as_chat_does(server):
    case = CASES["image"]
    body = chat(case)
    status, answer = server.json("POST", "/tokenize", {"model": "mm", "messages": body["messages"]})
    assert status == 200, answer
    assert answer["tokens"] == case["prompt_ids"]


def test_openai_client_streams_the_same(server):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="none")
    for name in ("image", "audio", "video"):
        case = CASES[name]
        body = chat(case)
        stream = client.chat.completions.create(model="mm", messages=body["messages"], max_tokens=body["max_tokens"],
                                                temperature=0, stream=True)
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        reply = client.chat.completions.create(model="mm", messages=body["messages"], max_tokens=body["max_tokens"],
                                               temperature=0, logprobs=True)
        assert [BYTES_TO_ID[bytes(t.bytes)] for t in reply.choices[0].logprobs.content] == case["output_ids"], name
        assert text == reply.choices[0].message.content, name


def test_local_files_under_the_allowed_path(server, media_dir):
    case = CASES["image"]
    answer = complete(server, chat(case, url_of=lambda p: f"file://{media_dir / p.name}"))
    assert output_ids(answer) == case["output_ids"]


def test_http_urls_from_allowed_hosts(server, media_http):
    for name in ("image", "video"):
        case = CASES[name]
        answer = complete(server, chat(case, url_of=lambda p: f"{media_http}/{p.name}"))
        assert output_ids(answer) == case["output_ids"], name
    port = media_http.rsplit(":", 1)[1]
    bad(server, [image(f"http://localhost:{port}/rgb_odd.png")], "'localhost' is not in --allowed-media-domains")
    bad(server, [image(f"{media_http}/missing.png")], "answered HTTP 404")
    bad(server, [image(f"{media_http}/huge.png")], "--max-media-bytes")
    server.assert_idle_and_healthy()


@pytest.mark.parametrize("flag, value, expect", [
    ("--allowed-media-domains", "http://images.example.com", "--allowed-media-domains: 'http://images.example.com'"),
    ("--allowed-media-domains", "*", "--allowed-media-domains: '*'"),
    ("--media-fetch-timeout", "0", "--media-fetch-timeout must be between"),
])
def test_bad_remote_media_flags_stop_startup(ember_bin, flag, value, expect):
    result = subprocess.run([str(ember_bin), "serve", str(MODEL), "--port", "0", flag, value],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert expect in result.stderr, result.stderr


def test_repeated_image_hits_the_encoder_and_prefix_caches_another_image_does_not(server):
    case = CASES["image"]
    encoded = server.metric("ember:mm_items_encoded_total")
    hits = server.metric("ember:mm_encoder_cache_hits_total")
    first = complete(server, chat(case))
    again = complete(server, chat(case))
    assert output_ids(again) == output_ids(first) == case["output_ids"]
    cached = again["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
    assert cached >= len(case["prompt_ids"]) - 16, again["usage"]  # all but the last partial block
    assert server.metric("ember:mm_items_encoded_total") <= encoded + 1
    assert server.metric("ember:mm_encoder_cache_hits_total") >= hits
    # The same text with an image never sent before: only the blocks before the image are shared,
    # and the answer is another.
    fresh = dict(case, content=[p if p["type"] == "text" else dict(p, file="q444.jpg") for p in case["content"]])
    other = complete(server, chat(fresh))
    assert output_ids(other) != case["output_ids"]
    image_start = case["prompt_ids"].index(IDS["<|image_start|>"])
    cached_other = other["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
    assert cached_other <= image_start, other["usage"]


def bad(server, content, expect):
    status, answer = server.json("POST", "/v1/chat/completions",
                                 {"model": "mm", "max_tokens": 2, "messages": [{"role": "user", "content": content}]})
    assert status == 400, answer
    assert expect in answer["error"]["message"], answer
    return answer


def image(url):
    return {"type": "image_url", "image_url": {"url": url}}


def test_hostile_media_are_400s_and_the_server_keeps_serving(server, media_dir):
    png = (MEDIA / "rgb_odd.png").read_bytes()
    mp4 = (MEDIA / "shapes.mp4").read_bytes()
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    bad(server, [image("data:image/jpeg;base64," + b64(b"\xff\xd8\xff\xe0" + bytes(200)))], "messages[0].content[0]")
    bad(server, [image("data:image/png;base64," + b64(png[: len(png) // 2]))], "messages[0].content[0]")
    bad(server, [{"type": "video_url", "video_url": {"url": "data:video/mp4;base64," + b64(mp4[: len(mp4) // 3])}}],
        "messages[0].content[0]")
    empty_wav = b"RIFF" + (36).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little") + \
        bytes.fromhex("0100010080bb000000770100020010006461746100000000")
    bad(server, [{"type": "input_audio", "input_audio": {"data": b64(empty_wav), "format": "wav"}}],
        "messages[0].content[0]")
    bad(server, [image("data:image/gif;base64," + b64(b"GIF89a" + bytes(64)))], "messages[0].content[0]")
    bad(server, [image("data:image/png;base64," + b64(png))] * 3, "at most 2 images")
    bad(server, [image("data:image/png;base64," + "A" * (2 << 20))], "--max-media-bytes")
    bad(server, [image("data:image/png;base64,@@@@")], "not valid base64")
    bad(server, [image(f"file://{MEDIA / 'wide.png'}")], "not a readable file under the allowed")
    bad(server, [image(f"file://{media_dir / 'escape.png'}")], "not a readable file under the allowed")
    bad(server, [image(f"file://{media_dir}/../{media_dir.name}/../../etc/passwd")], "not a readable file")
    bad(server, [image("https://example.com/cat.png")], "'example.com' is not in --allowed-media-domains")
    bad(server, [{"type": "image_url", "image_url": {"url": 5}}], "image_url")
    bad(server, [{"type": "text", "text": "<|patch|>"}, image("data:image/png;base64," + b64(png))], "placeholders")
    # A 100 MB data URL: the body is refused from its Content-Length, before a byte of it is read.
    status, _, _ = server.raw(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              b"Content-Length: 104857600\r\n\r\n")
    assert status == 413
    test_same_tokens_as_transformers(server, "image")
    server.assert_idle_and_healthy()


def test_text_only_model_refuses_media(ember_bin):
    s = Server(ember_bin, "--language-model-only", "--kv-cache-dtype", "f32", model=MODEL, name="mm",
               max_model_len=1024)
    try:
        bad(s, [image(data_url(MEDIA / "rgb_odd.png"))], "--language-model-only")
        status, answer = s.json("POST", "/v1/chat/completions",
                                {"model": "mm", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})
        assert status == 200, answer
    finally:
        s.stop()


def test_use_audio_in_video_feeds_the_track_to_the_audio_encoder(server):
    video = {"type": "video_url", "video_url": {"url": data_url(MEDIA / "shapes_audio.mp4")}}
    body = {"model": "mm", "max_tokens": 2, "messages": [{"role": "user", "content": [video]}]}
    plain = complete(server, body)
    with_audio = complete(server, dict(body, mm_processor_kwargs={"use_audio_in_video": True}))
    # The track's placeholders follow the frames': start + ceil(samples / 1920) + end.
    assert with_audio["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"] + 2, (plain, with_audio)
    silent = {"type": "video_url", "video_url": {"url": data_url(MEDIA / "shapes.mp4")}}
    status, answer = server.json("POST", "/v1/chat/completions",
                                 dict(body, messages=[{"role": "user", "content": [silent]}],
                                      mm_processor_kwargs={"use_audio_in_video": True}))
    assert status == 400 and "audio track" in answer["error"]["message"], answer
    status, answer = server.json("POST", "/v1/chat/completions", dict(body, mm_processor_kwargs={"fps": 3}))
    assert status == 400 and answer["error"]["param"] == "mm_processor_kwargs", answer
