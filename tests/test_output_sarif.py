"""`--output-format sarif`: a SARIF 2.1.0 log that GitHub code scanning and other viewers accept."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import jsonschema
import pytest

import jaxmigrate
from jaxmigrate.lint.output import Report, get_renderer
from jaxmigrate.lint.rule import Edit, Finding, Fix, Safety

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif_required.schema.json").read_text())
# RFC 3986 URI-reference characters; jsonschema does not check "format": "uri-reference" by itself.
URI_CHARACTERS = re.compile(r"^[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+$")

SOURCE = """\
import jax
数据 = jax.pmap(f)
y = x.legacy
y = x.legacy
z = risky()
"""


def at(text: str, needle: str, nth: int = 0) -> int:
    index = -1
    for _ in range(nth + 1):
        index = text.index(needle, index + 1)
    return index


def findings_for(source: str, path: str = "pkg/modèle.py") -> list[Finding]:
    """The findings a run over ``source`` would report, positions computed from the text."""
    from jaxmigrate.core.source import SourceText

    text = SourceText(source)

    def finding(code, needle, nth, message, fix=None):
        start = at(source, needle, nth)
        line, column = text.position(start)
        end_line, end_column = text.position(start + len(needle))
        return Finding(code, message, path, line, column, end_line, end_column, fix)

    legacy = [at(source, "x.legacy", n) for n in (0, 1)]
    risky = at(source, "risky")
    return [
        finding("JM999", "jax.pmap", 0, "`jax.pmap` is superseded"),  # a code with no rule class
        finding("JM901", "x.legacy", 0, "legacy attribute",
                Fix(Safety.SAFE, "use .modern", (Edit(legacy[0], legacy[0] + 8, "x.modern"),))),
        finding("JM901", "x.legacy", 1, "legacy attribute",
                Fix(Safety.SAFE, "use .modern", (Edit(legacy[1], legacy[1] + 8, "x.modern"),))),
        finding("JM902", "risky()", 0, "risky call",
                Fix(Safety.UNSAFE, "be careful", (Edit(risky, risky + 5, "careful"),))),
    ]


def sarif(findings, sources=None, **report_options) -> dict:
    sources = sources or {}
    report = Report(findings, files_checked=2, read_source=sources.get, **report_options)
    out = io.StringIO()
    get_renderer("sarif")(report, out)
    return json.loads(out.getvalue())


@pytest.fixture
def log(test_rules) -> dict:
    findings = findings_for(SOURCE) + [Finding("JM000", "cannot read: denied", "/abs/locked.py", 1, 1, 1, 1)]
    return sarif(findings, {"pkg/modèle.py": SOURCE})


def test_validates_against_the_sarif_schema(log):
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in log["runs"][0]["results"]]
    assert all(URI_CHARACTERS.match(uri) for uri in uris), uris


def test_an_empty_run_validates_too():
    log = sarif([])
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    assert log["runs"][0]["results"] == []
    assert log["runs"][0]["tool"]["driver"]["rules"] == []


@pytest.mark.parametrize(
    "break_it",
    [
        pytest.param(lambda log: log.pop("version"), id="no version"),
        pytest.param(lambda log: log["runs"][0]["results"][0].pop("message"), id="result without message"),
        pytest.param(lambda log: log["runs"][0]["results"][1]["fixes"][0].pop("artifactChanges"),
                     id="fix without changes"),
        pytest.param(lambda log: log["runs"][0]["results"][0].update(level="warn"), id="unknown level"),
        pytest.param(lambda log: log["runs"][0]["results"][0].update(line=3), id="invented property"),
    ],
)
def test_the_schema_subset_is_not_vacuous(log, break_it):
    break_it(log)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(SCHEMA).validate(log)


def test_driver_and_one_rule_per_code_that_occurs(log):
    run = log["runs"][0]
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-schema-2.1.0.json")
    assert run["columnKind"] == "unicodeCodePoints"
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("jaxmigrate", jaxmigrate.__version__)
    assert "informationUri" not in driver  # the project has no public home to link yet
    assert [rule["id"] for rule in driver["rules"]] == ["JM000", "JM901", "JM902", "JM999"]
    for result in run["results"]:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]


def test_rule_metadata_comes_from_the_rule_class_or_falls_back(log):
    rules = {rule["id"]: rule for rule in log["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["JM901"]["name"] == "test-legacy-attribute"
    assert rules["JM901"]["shortDescription"] == {"text": "test rule: .legacy attribute"}
    assert rules["JM901"]["help"]["text"] == "Flags ``x.legacy`` and offers a safe fix to ``x.modern``."
    assert rules["JM901"]["help"]["markdown"].startswith("# JM901 test-legacy-attribute\n")
    # The tool's own code: its description from the registry.
    assert rules["JM000"]["shortDescription"] == {"text": "file cannot be read or parsed"}
    assert rules["JM000"]["defaultConfiguration"] == {"level": "error"}
    # No rule class (removed, or another engineer's branch): the code and a message it produced.
    assert rules["JM999"]["name"] == "JM999"
    assert rules["JM999"]["shortDescription"] == {"text": "`jax.pmap` is superseded"}


def test_results(log):
    results = log["runs"][0]["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [
        ("JM999", "warning"), ("JM901", "warning"), ("JM901", "warning"), ("JM902", "warning"),
        ("JM000", "error"),
    ]
    pmap = results[0]
    assert pmap["message"] == {"text": "`jax.pmap` is superseded"}
    assert pmap["locations"] == [{
        "physicalLocation": {
            "artifactLocation": {"uri": "pkg/mod%C3%A8le.py", "uriBaseId": "%SRCROOT%"},
            # Columns count code points: the two CJK characters are one column each.
            "region": {"startLine": 2, "startColumn": 6, "endLine": 2, "endColumn": 14},
        }
    }]
    assert results[4]["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "file:///abs/locked.py"}
    assert "fixes" not in pmap and "fixes" not in results[4]


def test_fixes_carry_their_edits_as_line_column_replacements(log):
    risky = log["runs"][0]["results"][3]
    assert risky["fixes"] == [{
        "description": {"text": "be careful"},
        "artifactChanges": [{
            "artifactLocation": {"uri": "pkg/mod%C3%A8le.py", "uriBaseId": "%SRCROOT%"},
            "replacements": [{
                "deletedRegion": {"startLine": 5, "startColumn": 5, "endLine": 5, "endColumn": 10},
                "insertedContent": {"text": "careful"},
            }],
        }],
        "properties": {"safety": "unsafe"},
    }]


def test_a_multi_line_edit_and_an_insertion():
    source = "a = f(\n    1,\n)\n"
    fix = Fix(Safety.SAFE, "rewrite", (Edit(4, source.index(")") + 1, "g(1)"), Edit(0, 0, "# hi\n")))
    log = sarif([Finding("JM999", "m", "a.py", 1, 5, 3, 2, fix)], {"a.py": source})
    [change] = log["runs"][0]["results"][0]["fixes"][0]["artifactChanges"]
    assert [r["deletedRegion"] for r in change["replacements"]] == [
        {"startLine": 1, "startColumn": 1, "endLine": 1, "endColumn": 1},
        {"startLine": 1, "startColumn": 5, "endLine": 3, "endColumn": 2},
    ]


def test_without_the_text_a_fix_uses_character_offsets():
    fix = Fix(Safety.SAFE, "use .modern", (Edit(11, 19, "x.modern"),))
    log = sarif([Finding("JM999", "m", "gone.py", 2, 1, 2, 9, fix)])
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    [replacement] = log["runs"][0]["results"][0]["fixes"][0]["artifactChanges"][0]["replacements"]
    assert replacement["deletedRegion"] == {"charOffset": 11, "charLength": 8}


def fingerprints(source: str, findings: list[Finding]) -> list[str]:
    log = sarif(findings, {"pkg/modèle.py": source})
    return [r["partialFingerprints"]["jaxmigrate/v1"] for r in log["runs"][0]["results"]]


def test_fingerprints_survive_lines_inserted_above(test_rules):
    edited = "# a new comment\n\n" + SOURCE
    before, after = findings_for(SOURCE), findings_for(edited)
    assert [f.line + 2 for f in before] == [f.line for f in after]  # the findings did move
    assert fingerprints(SOURCE, before) == fingerprints(edited, after)


def test_fingerprints_tell_identical_lines_apart(test_rules):
    prints = fingerprints(SOURCE, findings_for(SOURCE))
    assert len(set(prints)) == len(prints)  # lines 3 and 4 are the same text, same code


def test_fingerprints_change_when_the_flagged_line_does(test_rules):
    edited = SOURCE.replace("数据 = jax.pmap(f)", "数据 = jax.pmap(g)")
    old, new = fingerprints(SOURCE, findings_for(SOURCE)), fingerprints(edited, findings_for(edited))
    assert old[0] != new[0] and old[1:] == new[1:]


def test_fingerprints_without_source_use_the_message():
    finding = Finding("JM000", "cannot read: denied", "x.py", 1, 1, 1, 1)
    first = sarif([finding])["runs"][0]["results"][0]["partialFingerprints"]
    moved = sarif([Finding("JM000", "cannot read: denied", "x.py", 5, 1, 5, 1)])["runs"][0]["results"][0]
    assert first == moved["partialFingerprints"]


def test_notebook_findings_have_no_file_region_and_no_fix():
    fix = Fix(Safety.SAFE, "f", (Edit(0, 3, "jit"),))
    log = sarif([Finding("JM999", "pmap", "nb.ipynb", 3, 1, 3, 9, fix, cell=2)])
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    [result] = log["runs"][0]["results"]
    assert "region" not in result["locations"][0]["physicalLocation"]
    assert result["properties"] == {"cell": 2, "line": 3, "column": 1}
    assert "fixes" not in result


def apply_replacements(text: str, change: dict) -> str:
    """What a SARIF consumer does with one artifactChange's line/column replacements."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column - 1

    for replacement in sorted(change["replacements"], key=lambda r: (r["deletedRegion"]["startLine"],
                                                                      r["deletedRegion"]["startColumn"]), reverse=True):
        region = replacement["deletedRegion"]
        start, end = offset(region["startLine"], region["startColumn"]), offset(region["endLine"], region["endColumn"])
        text = text[:start] + replacement["insertedContent"]["text"] + text[end:]
    return text


def test_a_codemod_fix_is_expressed_as_the_replacements_it_makes_for_its_own_site():
    # JM101's fix is a whole-module codemod: SARIF still gets a fix, the rewrite of this site only.
    from jaxmigrate.lint.checker import fix_text, lint_text
    from jaxmigrate.lint.registry import rule_by_code

    from pmap_driver import driven

    source = driven("step = jax.pmap(f, axis_name='i')\nother = jax.pmap(g)  # noqa: JM101\nreturn step(x), other(x)\n")
    rules = (rule_by_code("JM101"),)
    (finding,) = lint_text(source, "train.py", rules, (0, 10))
    assert finding.fix.codemod and not finding.fix.edits
    log = sarif([finding], {"train.py": source})
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    [fix] = log["runs"][0]["results"][0]["fixes"]
    assert fix["properties"] == {"safety": "unsafe"}
    [change] = fix["artifactChanges"]
    assert apply_replacements(source, change) == fix_text(source, "train.py", rules, (0, 10), unsafe=True).text


def broken_codemod(text, sites):
    raise RuntimeError("codemod bug")


def test_a_codemod_that_fails_costs_its_result_the_fix_not_the_log():
    fix = Fix(Safety.SAFE, "rewrite", codemod=f"{__name__}:broken_codemod")
    log = sarif([Finding("JM999", "m", "a.py", 1, 1, 1, 4, fix)], {"a.py": "x = 1\n"})
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    assert "fixes" not in log["runs"][0]["results"][0]


def test_a_file_with_many_codemod_fixes_gets_replacements_for_the_first_ones_only(monkeypatch):
    """Each codemod fix costs a run over the whole file: past a budget per file the results keep
    no fix, so a file with thousands of findings takes seconds, not minutes."""
    from jaxmigrate.lint.checker import lint_text
    from jaxmigrate.lint.output import sarif as sarif_module
    from jaxmigrate.lint.registry import rule_by_code

    monkeypatch.setattr(sarif_module._CodemodBudget, "PER_FILE", 3)
    source = "import jax\n" + "".join(f"x{i} = jax.tree_map(f, t)\n" for i in range(5))
    findings = lint_text(source, "many.py", (rule_by_code("JM601"),), (0, 10))
    assert len(findings) == 5 and all(f.fix is not None and f.fix.codemod for f in findings)
    results = sarif(findings, {"many.py": source})["runs"][0]["results"]
    assert [("fixes" in r) for r in results] == [True, True, True, False, False]


def test_a_codemod_fix_keeps_to_the_configured_line_length_as_fix_does(project):
    """With `line-length = 120`, --fix writes the make_mesh on one line; SARIF's fix said five."""
    from click.testing import CliRunner

    from jaxmigrate.cli import main

    (project / "pyproject.toml").write_text("[tool.jaxmigrate]\nline-length = 120\n")
    source = ("import jax\nfrom jax.experimental import mesh_utils\nfrom jax.sharding import Mesh\n\n"
              'mesh = Mesh(mesh_utils.create_device_mesh((4, 2)), ("data", "model"))\n')
    (project / "m.py").write_text(source)
    log = json.loads(CliRunner().invoke(main, ["m.py", "--no-cache", "--unsafe-fixes", "--output-format", "sarif"]).stdout)
    (result,) = [r for r in log["runs"][0]["results"] if r["ruleId"] == "JM307"]
    inserted = [rep["insertedContent"]["text"] for change in result["fixes"][0]["artifactChanges"]
                for rep in change["replacements"]]
    CliRunner().invoke(main, ["m.py", "--no-cache", "--unsafe-fixes", "--fix"])
    fixed_line = next(line for line in (project / "m.py").read_text().splitlines() if "make_mesh" in line)
    assert fixed_line + "\n" in inserted and fixed_line.endswith(")")
