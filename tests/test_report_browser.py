"""The report as a browser shows it: headless Chromium (Debian's `chromium`) loads the page from
disk, and the tests read what it rendered (`--dump-dom`: the DOM after the page ran). Skipped,
saying why, only when no Chromium is installed (`.ci/run` installs it)."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from report_project import XSS_CODE, XSS_FILE, make

from jaxmigrate.cli import main

CHROMIUM = next((found for name in ("chromium", "chromium-browser", "google-chrome")
                 if (found := shutil.which(name))), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium to render the report in"
                                " (apt-get install chromium; .ci/run installs it)")


def rendered_dom(page: Path, profile: Path) -> str:
    """The DOM Chromium built from the page. Remote hosts resolve nowhere: the page must not
    need the network (it loads nothing, and its CSP forbids it anyway)."""
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-extensions", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
               "--host-resolver-rules=MAP * ~NOTFOUND", "--dump-dom", page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class Page(HTMLParser):
    """What the page shows: the text of each element with an id, the title, the elements."""

    def __init__(self, dom: str) -> None:
        super().__init__()
        self.open: list[tuple[str, str | None]] = []
        self.by_id: dict[str, str] = {}
        self.tags: list[tuple[str, dict]] = []
        self.title = ""
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag not in ("meta", "br", "input", "img", "link"):
            self.open.append((tag, attrs.get("id")))
            if attrs.get("id"):
                self.by_id.setdefault(attrs["id"], "")

    def handle_endtag(self, tag):
        while self.open:
            if self.open.pop()[0] == tag:
                break

    def handle_data(self, data):
        for tag, element_id in self.open:
            if element_id:
                self.by_id[element_id] += data
        if self.open and self.open[-1][0] == "title":
            self.title += data

    def shown(self, element_id: str) -> str:
        return " ".join(self.by_id[element_id].split())


def test_the_report_as_chromium_renders_it(project, tmp_path_factory):
    make(project)
    invoke = CliRunner().invoke
    assert invoke(main, ["report", ".", "-o", "out/report.html"], catch_exceptions=False).exit_code == 0
    # One fix later: the next report in the folder shows it.
    (project / XSS_FILE).write_text("import jax\n\na = jax.tree.map(f, t)\nb = jax.tree_map(g, t)  # noqa: JM601\n")
    assert invoke(main, ["report", ".", "-o", "out/report.html"], catch_exceptions=False).exit_code == 0

    page = Page(rendered_dom(project / "out" / "report.html", tmp_path_factory.mktemp("chromium")))

    assert [page.shown(f"total-{name}") for name in ("fixed", "safe", "unsafe", "left", "suppressed")] == [
        "1 fixed", "0 fixable safely", "3 fixable unsafely", "3 left with a reason", "1 suppressed"]
    assert "Since the last report (" in page.shown("progress") and "1 fixed, 0 new." in page.shown("progress")
    assert "JM601 removed-tree-aliases" in page.shown("by-rule")
    assert "data/" in page.shown("by-folder")
    pmap = page.shown("pmap")
    assert "data/kept.py:3:8" in pmap and "kept" in pmap and "`devices=`" not in pmap  # code spans rendered
    assert f'line 15 main(load("{XSS_CODE}"))' in pmap
    assert "2 × no fix: JM504 device-count-reshape has no automatic fix" in page.shown("reasons")
    assert f"{XSS_FILE}:4:5" in page.shown("findings")  # the suppressed one: a name of markup, as text
    assert "What it does" in page.shown("rule-JM101")
    # Nothing the code base wrote became an element, and nothing ran.
    assert [tag for tag, _ in page.tags if tag in ("img", "script", "iframe", "object")] == []
    assert page.title.startswith("jaxmigrate report") and "pwned" not in page.title
