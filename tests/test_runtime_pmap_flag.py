"""JM103's message quotes the error jax 0.10 really raises for the stale pmap transition flag."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jaxmigrate.lint.rules.pmap_shmap_merge_flag import ERROR

pytestmark = pytest.mark.runtime

PROGRAM = Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "stale_pmap_shmap_merge" / "program.py"


def test_current_jax_rejects_the_flag_with_the_quoted_error():
    pytest.importorskip("jax")
    code = f"import json, runpy; print(json.dumps(runpy.run_path({str(PROGRAM)!r})['main']()))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    errors = json.loads(done.stdout.strip().splitlines()[-1])
    assert errors == {"update": ERROR, "read": "AttributeError"}
