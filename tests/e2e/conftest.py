import os
import pathlib

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
