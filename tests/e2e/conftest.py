import os
import pathlib
import shutil
import subprocess

import pytest

from serving import Server

ROOT = pathlib.Path(__file__).resolve().parents[2]


LOG_TAIL_LINES = 80


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report ends with the last lines of every server it started or still uses:
    what the servers logged is often the only trace of why a request went another way."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    first = getattr(item, "_ember_first_server", len(Server.started))
    for i, server in enumerate(Server.started):
        if i >= first or server.proc.poll() is None:
            try:
                tail = "\n".join(server.log().splitlines()[-LOG_TAIL_LINES:])
            except OSError as e:
                tail = f"(log unreadable: {e})"
            report.sections.append((f"ember serve on port {server.port}: last {LOG_TAIL_LINES} lines", tail))


@pytest.fixture(autouse=True)
def _server_logs(request):
    """Notes which servers this test starts, and removes the logs of those that have exited."""
    request.node._ember_first_server = len(Server.started)
    yield
    for server in Server.started[request.node._ember_first_server:]:
        if server.proc.poll() is not None and os.path.exists(server.log_path):
            os.unlink(server.log_path)


@pytest.fixture(scope="session", autouse=True)
def _remove_server_logs():
    yield
    for server in Server.started:
        if os.path.exists(server.log_path):
            os.unlink(server.log_path)


@pytest.fixture(scope="session")
def ember_bin() -> pathlib.Path:
    """The ember binary under test: $EMBER_BIN, or the release build."""
    path = pathlib.Path(os.environ.get("EMBER_BIN", ROOT / "build/release/tools/ember/ember"))
    if not path.exists():
        pytest.fail(f"ember binary not found at {path}; build it first (make build)")
    return path


@pytest.fixture(scope="session")
def golden_dir() -> pathlib.Path:
    return ROOT / "tests/golden/muse_spark"


@pytest.fixture(scope="module")
def two_hosts():
    """Two "hosts" on this machine: network namespaces joined by a veth pair (10.77.0.1 and
    10.77.0.2), torn down afterwards. Needs root (CI runs as root); skips where it cannot make them."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("network namespaces need root and iproute2")
    tag = f"e{os.getpid() % 100000}"
    hosts = {"10.77.0.1": f"{tag}h0", "10.77.0.2": f"{tag}h1"}
    links = [f"{tag}v0", f"{tag}v1"]
    setup = [["ip", "netns", "add", hosts["10.77.0.1"]], ["ip", "netns", "add", hosts["10.77.0.2"]],
             ["ip", "link", "add", links[0], "type", "veth", "peer", "name", links[1]]]
    for (address, ns), link in zip(hosts.items(), links):
        setup += [["ip", "link", "set", link, "netns", ns], ["ip", "-n", ns, "addr", "add", f"{address}/24", "dev", link],
                  ["ip", "-n", ns, "link", "set", link, "up"], ["ip", "-n", ns, "link", "set", "lo", "up"]]
    try:
        for cmd in setup:
            made = subprocess.run(cmd, capture_output=True, text=True)
            if made.returncode != 0:
                pytest.skip(f"cannot make network namespaces here ({' '.join(cmd)}: {made.stderr.strip()})")
        yield hosts, links
    finally:
        for ns in hosts.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
