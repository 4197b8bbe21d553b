"""`--output-format json`: one JSON array, `Finding.to_dict()` per finding, in report order."""

from __future__ import annotations

import io
import json

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


def test_output_is_ascii_and_deterministic():
    text = render(Report(FINDINGS, files_checked=3))
    assert text.isascii()  # non-ASCII paths and messages travel as \u escapes
    assert "mod\\u00e8les/donn\\u00e9es.py" in text
    assert text == render(Report(FINDINGS, files_checked=3))


def test_notebook_findings_carry_their_cell():
    finding = Finding("JM101", "pmap", "nb.ipynb", 2, 1, 2, 9, cell=4)
    assert json.loads(render(Report([finding], files_checked=1)))[0]["cell"] == 4
