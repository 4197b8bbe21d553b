"""`--output-format json`: one JSON array, `Finding.to_dict()` per finding, in report order."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

from jaxmigrate.lint.output import Report, get_renderer
from jaxmigrate.lint.rule import Edit, Finding, Fix, Safety

FINDINGS = [
    Finding("JM000", "cannot decode: invalid start byte", "bad.py", 1, 1, 1, 1),
    Finding(
        "JM101", "`jax.pmap` → `jax.shard_map`", "modèles/données.py", 3, 5, 3, 13,
        Fix(Safety.SAFE, "rewrite as jit(shard_map)", (Edit(20, 28, "jax.jit"),)),
    ),
    Finding(
        "JM401", "psum over the batch axis", "train.py", 7, 9, 8, 2,
        Fix(Safety.UNSAFE, "drop the psum GSPMD inserts", (Edit(50, 60, "x"),)),
    ),
]


def render(report: Report) -> str:
    out = io.StringIO()
    get_renderer("json")(report, out)
    return out.getvalue()


def test_each_finding_is_one_object_with_exactly_the_documented_keys():
    assert json.loads(render(Report(FINDINGS, files_checked=3))) == [
        {
            "code": "JM000", "message": "cannot decode: invalid start byte", "path": "bad.py",
            "line": 1, "column": 1, "end_line": 1, "end_column": 1, "fix": None,
        },
        {
            "code": "JM101", "message": "`jax.pmap` → `jax.shard_map`", "path": "modèles/données.py",
            "line": 3, "column": 5, "end_line": 3, "end_column": 13,
            "fix": {"safety": "safe", "message": "rewrite as jit(shard_map)"},
        },
        {
            "code": "JM401", "message": "psum over the batch axis", "path": "train.py",
            "line": 7, "column": 9, "end_line": 8, "end_column": 2,
            "fix": {"safety": "unsafe", "message": "drop the psum GSPMD inserts"},
        },
    ]


def test_order_is_the_reports_not_resorted():
    reversed_report = Report(list(reversed(FINDINGS)), files_checked=3)
    assert [f["code"] for f in json.loads(render(reversed_report))] == ["JM401", "JM101", "JM000"]


def test_no_findings_is_an_empty_array():
    assert render(Report([], files_checked=5)) == "[]\n"


def test_output_is_ascii_with_keys_in_the_documented_order():
    text = render(Report(FINDINGS, files_checked=3))
    assert text.isascii()  # non-ASCII paths and messages travel as \u escapes
    assert "mod\\u00e8les/donn\\u00e9es.py" in text
    # Key order is part of the format (json.loads equality above would not see it).
    assert [list(item) for item in json.loads(text)] == [KEYS] * 3
    assert text.startswith(
        '[\n  {\n    "code": "JM000",\n    "message": "cannot decode: invalid start byte",\n'
        '    "path": "bad.py",\n    "line": 1,\n    "column": 1,\n    "end_line": 1,\n'
        '    "end_column": 1,\n    "fix": null\n  },\n')


KEYS = ["code", "message", "path", "line", "column", "end_line", "end_column", "fix"]


def test_the_same_tree_gives_the_same_bytes_whatever_the_hash_seed(tmp_path):
    # Sets and dicts of strings iterate in a per-process order (PYTHONHASHSEED): nothing the
    # report holds may depend on it, across files, findings and fixes.
    for name in ("b.py", "a.py", "sub/c.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(
            "import jax\nfrom jax.experimental.maps import Mesh, xmap\nfrom jax import tree_map\n"
            "f = jax.pmap(lambda x: x)\ny = tree_map(len, {})\nm = Mesh(d, ('x',))\nwith m:\n    pass\n")
    outputs = set()
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        result = subprocess.run([sys.executable, "-m", "jaxmigrate", ".", "--no-cache", "--output-format", "json"],
                                cwd=tmp_path, env=env, capture_output=True, timeout=120)
        assert result.returncode == 1, result.stderr
        outputs.add(result.stdout)
    assert len(outputs) == 1
    assert len(json.loads(outputs.pop())) >= 12


def test_notebook_findings_carry_their_cell():
    finding = Finding("JM101", "pmap", "nb.ipynb", 2, 1, 2, 9, cell=4)
    assert json.loads(render(Report([finding], files_checked=1)))[0]["cell"] == 4
