# Shared fixtures of the Python module's tests: where the repository and the CLIs are (CTest sets
# WHITTLE_ROOT and WHITTLE_BIN; PYTHONPATH points at build/python), and running a CLI.
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("WHITTLE_ROOT", Path(__file__).resolve().parents[2]))
BIN = Path(os.environ.get("WHITTLE_BIN", ROOT / "build" / "bin"))
MODELS = ROOT / "models"


@pytest.fixture
def cli():
    """Runs a CLI from build/bin and returns its stdout; skips when it is not built."""

    def run(tool, *args):
        exe = BIN / tool
        if not exe.exists():
            pytest.skip(f"{exe} is not built")
        done = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True)
        assert done.returncode == 0, f"{tool} failed: {done.stderr}"
        return done.stdout

    return run
