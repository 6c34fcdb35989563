import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


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
