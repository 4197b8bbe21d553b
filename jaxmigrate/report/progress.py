"""The progress since the last report written to the same folder: a small JSON state beside the
report (``.jaxmigrate-report.json``) holds what that report found, as baseline entries (rule,
file, flagged code, count), so that lines moving do not count as progress.

A finding of the last report that is gone from this one is *fixed*; one that is new is *new*
(matched as a baseline matches: by code, then a changed line by its rule, file and likeness,
``baseline.unpaired``). Only files under the paths this report covers are compared:
a report of ``src/`` does not count the findings of ``tests/`` as fixed.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path, PurePosixPath

from jaxmigrate.baseline import BaselineError, Entry, parse, relative_to, unpaired
from jaxmigrate.files import write_atomic
from jaxmigrate.report.model import MigrationReport, Progress

STATE_FILE = ".jaxmigrate-report.json"
VERSION = 1


def current_entries(report: MigrationReport) -> Counter[Entry]:
    return Counter(item.key for item in report.items)


def compare(report: MigrationReport, folder: Path, covered: list[Path]) -> Progress | None:
    """The progress since the state in ``folder``, or None when there is none (or it is unreadable)."""
    try:
        data = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
        previous = parse({"version": data.get("version"), "entries": data.get("entries")}, folder / STATE_FILE)
        generated, totals = str(data["generated"]), dict(data["totals"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, BaselineError):
        return None
    roots = [relative_to(str(path), folder) for path in covered]
    previous = Counter({e: n for e, n in previous.items() if any(_under(e.path, root) for root in roots)})
    new, fixed = unpaired(current_entries(report), previous)
    return Progress(generated, fixed, new, totals)


def save(report: MigrationReport, folder: Path) -> None:
    entries = current_entries(report)
    data = {
        "version": VERSION,
        "generated": report.generated,
        "totals": report.totals(),
        "entries": [entry.to_dict(count) for entry, count in sorted(entries.items())],
    }
    file = folder / STATE_FILE
    text = (json.dumps(data, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    if file.exists():
        write_atomic(file, text)
    else:
        file.write_bytes(text)


def _under(path: str, root: str) -> bool:
    if root in (".", ""):
        return not path.startswith("../")
    return path == root or PurePosixPath(path).is_relative_to(PurePosixPath(root))
