"""`jaxmigrate report`: what the report says (categories, by rule and folder, pmap routes and
their blockers, reasons, progress since the last report) and that nothing from the code base can
become markup. The page itself is checked in a browser in test_report_browser.py."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from report_project import XSS_CODE, XSS_FILE, make

from jaxmigrate.cli import main
from jaxmigrate.lint.findings import Blocker

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "legacy"


def jaxmigrate(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def report_data(*args: str) -> dict:
    result = jaxmigrate("report", *args, "--format", "json", "-o", "-")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def legacy(project) -> Path:
    return make(project)


def test_totals_by_rule_and_by_folder(legacy):
    data = report_data(".")
    assert data["totals"] == {"fixed": 0, "safe": 1, "unsafe": 3, "left": 3, "suppressed": 1}
    zero = dict.fromkeys(data["totals"], 0)
    assert data["by_rule"] == {
        "JM101": {**zero, "unsafe": 1, "left": 1},
        "JM302": {**zero, "unsafe": 2},
        "JM504": {**zero, "left": 2},
        "JM601": {**zero, "safe": 1, "suppressed": 1},
    }
    assert data["by_folder"] == {".": {**zero, "safe": 1, "unsafe": 3, "suppressed": 1}, "data": {**zero, "left": 3}}


def test_every_pmap_step_has_its_route_and_the_line_that_blocks_it(legacy):
    steps = {step["path"]: step for step in report_data(".")["pmap_steps"]}
    assert steps["steps.py"]["route"] == "exact"
    [blocker] = steps["steps.py"]["blockers"]
    assert (blocker["scope"], blocker["line"]) == ("global view", 15)
    assert blocker["code"] == f'main(load("{XSS_CODE}"))'
    assert blocker["reason"].startswith("`main(load(\"<img src=x") and "has pmap's device axis here" in blocker["reason"]
    assert steps["data/kept.py"]["route"] == "kept"
    # Both routes are blocked, each for its own reason (`f` is no def of the module's).
    assert [(b["scope"], b["line"]) for b in steps["data/kept.py"]["blockers"]] == [("rewrite", 3), ("global view", 3)]
    assert "`devices=`" in steps["data/kept.py"]["blockers"][0]["reason"]


def test_a_module_the_global_view_can_take_takes_it(project):
    routes = {Path(step["path"]).name: step["route"] for step in report_data(str(EXAMPLES))["pmap_steps"]}
    assert routes["mlp_data_parallel.py"] == "global view"


def test_reasons_are_grouped_with_counts(legacy):
    reasons = [(r["count"], r["scope"], r["reason"]) for r in report_data(".")["reasons"]]
    assert reasons[0][:2] == (2, "no fix") and reasons[0][2].startswith("JM504 device-count-reshape has no automatic fix")
    assert sorted((count, scope, reason[:30]) for count, scope, reason in reasons[1:]) == [
        (1, "global view", "`main(load(\"<img src=x onerror"), (1, "global view", "the pmapped function is not a "),
        (1, "rewrite", "`devices=` picks a device subs")]


def test_blockers_are_the_findings_own_data_not_parsed_from_the_message(legacy):
    from jaxmigrate import engine
    from jaxmigrate.config import load_settings

    settings = load_settings(None, legacy)
    result = engine.run_paths([Path("data/kept.py")], settings, engine.Job(engine.Mode.CHECK, True, (0, 10)),
                              use_cache=False)
    [finding] = result.findings
    assert finding.blockers == (
        Blocker("rewrite", "`devices=` picks a device subset the rewrite's mesh of every device would not reproduce", 3),
        Blocker("global view", "the pmapped function is not a `def` or a `partial` of one, of this module "
                "(`f` is not bound once, to a `def`, above the pmap)", 3))
    assert "not rewritten: " + finding.blockers[0].reason in finding.message


def test_progress_since_the_last_report_in_the_same_folder(legacy, monkeypatch):
    first = jaxmigrate("report", ".", "-o", "out/report.json", "--format", "json")
    assert first.exit_code == 0
    assert json.loads((legacy / "out" / "report.json").read_text())["progress"] is None
    assert (legacy / "out" / ".jaxmigrate-report.json").exists()
    # Lines move and one finding is fixed; another folder of the project is not covered now.
    (legacy / XSS_FILE).write_text("import jax\n# moved\n\na = jax.tree.map(f, t)\nb = jax.tree_map(g, t)  # noqa: JM601\n")
    (legacy / "data" / "shard.py").write_text("import os\n" + (legacy / "data" / "shard.py").read_text())
    monkeypatch.chdir(legacy / "out")  # the state's paths do not depend on the working folder
    second = jaxmigrate("report", "..", "-o", "report.json", "--format", "json")
    assert "; since the last report (" in second.stderr and "): 1 fixed, 0 new." in second.stderr
    data = json.loads((legacy / "out" / "report.json").read_text())
    assert data["totals"]["fixed"] == 1 and data["totals"]["safe"] == 0
    assert data["progress"]["fixed"] == [{"code": "JM601", "path": f"../{XSS_FILE}",
                                          "source": "a = jax.tree_map(f, t)", "count": 1}]
    assert data["by_rule"]["JM601"]["fixed"] == 1
    monkeypatch.chdir(legacy)
    third = jaxmigrate("report", "data", "-o", "out/report.json", "--format", "json")
    assert "): 0 fixed, 0 new." in third.stderr  # steps.py is not under data/: not "fixed"


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def test_the_html_escapes_everything_and_loads_nothing(legacy):
    assert jaxmigrate("report", ".", "-o", "report.html").exit_code == 0
    page = (legacy / "report.html").read_text()
    parsed = Tags()
    parsed.feed(page)
    tags = [tag for tag, _ in parsed.tags]
    assert "img" not in tags and "script" not in tags and "link" not in tags and "iframe" not in tags
    assert not [attrs for _, attrs in parsed.tags if any(name.startswith("on") for name in attrs)]
    text = "".join(parsed.text)
    assert f"{XSS_FILE}:3:5" in text and XSS_CODE in text  # shown, as text
    # No asset from anywhere: no src=, no CSS url(); the only http links are the rules' references.
    assert not [attrs for _, attrs in parsed.tags if "src" in attrs]
    assert "url(" not in page and "@import" not in page
    assert all(attrs["href"].startswith(("#", "vscode://file/", "https://")) or "://" not in attrs["href"]
               for tag, attrs in parsed.tags if tag == "a")
    csp = [attrs["content"] for tag, attrs in parsed.tags if tag == "meta" and attrs.get("http-equiv")]
    assert csp and "default-src 'none'" in csp[0] and "script-src" not in csp[0]


def test_links_lead_to_the_file_and_to_the_rules_explanation(legacy):
    jaxmigrate("report", ".", "-o", "site/report.html")
    page = (legacy / "site" / "report.html").read_text()
    parsed = Tags()
    parsed.feed(page)
    hrefs = [attrs["href"] for tag, attrs in parsed.tags if tag == "a"]
    assert "../data/kept.py" in hrefs
    assert f"vscode://file{legacy.as_posix()}/data/kept.py:3:8" in hrefs
    ids = {attrs.get("id") for _, attrs in parsed.tags}
    for code in ("JM101", "JM302", "JM504", "JM601"):
        assert f"#rule-{code}" in hrefs and f"rule-{code}" in ids
    # The explanation is embedded: JM504's own docs, as HTML.
    assert re.search(r'id="rule-JM504".*?<h4>What it does</h4>', page, re.S)


def test_markdown_escapes_markup_and_table_cells(legacy):
    result = jaxmigrate("report", ".", "--format", "markdown", "-o", "-")
    assert "<img" not in result.stdout
    assert "&lt;img src=x onerror=alert(1)&gt;.py:3:5" in result.stdout
    assert "| 0 | 1 | 3 | 3 | 1 |" in result.stdout  # the totals row


def test_in_a_notebook_the_blocking_line_is_named_by_its_cell(project):
    cells = [["import jax\n"], ["x = jax.tree_map(f, t)  # noqa: JM601\n", "step = jax.pmap(f, devices=d)\n"]]
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                           "source": source} for source in cells],
                "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    (project / "n.ipynb").write_text(json.dumps(notebook))
    data = report_data(".")
    [step] = data["pmap_steps"]
    assert (step["cell"], step["line"], step["route"]) == (2, 2, "kept")
    assert [(b["cell"], b["line"], b["code"]) for b in step["blockers"]] == [(2, 2, "step = jax.pmap(f, devices=d)")] * 2
    assert [(f["code"], f["cell"], f["line"], f["state"]) for f in data["findings"]] == [
        ("JM601", 2, 1, "suppressed"), ("JM101", 2, 2, "left")]


def test_with_a_baseline_the_report_marks_what_it_holds_and_lists_stale_entries(legacy):
    assert jaxmigrate("data", "--write-baseline", "base.json").exit_code == 0
    (legacy / "data" / "kept.py").write_text("import jax\n\nstep = jax.jit(f)\n")
    data = report_data(".", "--baseline", "base.json")
    assert data["baseline"]["file"] == "base.json"
    assert data["baseline"]["held"] == 2  # the two JM504 of data/shard.py
    assert data["baseline"]["stale"] == [{"code": "JM101", "path": "data/kept.py",
                                          "source": "step = jax.pmap(f, devices=jax.devices()[:2])", "count": 1}]
    assert sorted((f["path"], f["line"]) for f in data["findings"] if f["baselined"]) == [
        ("data/shard.py", 5), ("data/shard.py", 9)]
    page = jaxmigrate("report", ".", "--baseline", "base.json", "-o", "-").stdout
    assert "holds 2 of these findings; 1 of its entries match no finding" in page
