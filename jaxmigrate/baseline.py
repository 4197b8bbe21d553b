"""A baseline for adopting jaxmigrate gradually: the findings a codebase has today, written once
(``--write-baseline FILE``); later runs (``--baseline FILE``) report only findings not in it.

An entry is a rule code, a file and the code the finding flags (its lines, stripped), with a
count: not a line number, so an edit above a baselined finding does not bring it back, and two
identical findings in one file need two entries' worth of count. A finding whose line changed
a little (``--fix`` rewrote another finding on it) still matches the entry of its rule and file
it is most like (``unpaired``). An entry that no finding matches
any more is *stale* (its code was fixed): the run says so, and the next ``--write-baseline``
drops it. Paths are stored relative to the baseline file's folder, so the
baseline means the same from whichever folder jaxmigrate runs.
"""

from __future__ import annotations

import difflib
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from jaxmigrate.files import write_atomic
from jaxmigrate.lint.findings import Finding
from jaxmigrate.source_lines import SourceLines

VERSION = 1


class BaselineError(Exception):
    pass


@dataclass(frozen=True, order=True)
class Entry:
    code: str
    path: str  # relative to the baseline's folder, with forward slashes
    source: str  # the flagged lines, stripped, joined with "\n"

    def to_dict(self, count: int) -> dict:
        return {"code": self.code, "path": self.path, "source": self.source, "count": count}


def entry_of(finding: Finding, anchor: Path, sources: SourceLines) -> Entry:
    return Entry(finding.code, relative_to(finding.path, anchor), sources.flagged(finding))


def relative_to(path: str, anchor: Path) -> str:
    """``path`` (as findings show it) relative to the folder ``anchor``; as it is when they share
    no root (another drive)."""
    try:
        return Path(os.path.relpath(Path(path).absolute(), anchor.absolute())).as_posix()
    except ValueError:
        return Path(path).as_posix()


def count_entries(findings: Iterable[Finding], anchor: Path, sources: SourceLines) -> Counter[Entry]:
    return Counter(entry_of(f, anchor, sources) for f in findings)


def write(file: Path, findings: Iterable[Finding], sources: SourceLines) -> Counter[Entry]:
    entries = count_entries(findings, file.parent, sources)
    data = {
        "version": VERSION,
        "tool": "jaxmigrate",
        "entries": [entry.to_dict(count) for entry, count in sorted(entries.items())],
    }
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if file.exists():
        write_atomic(file, text.encode("utf-8"))
    else:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(text.encode("utf-8"))
    return entries


def read(file: Path) -> Counter[Entry]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as error:
        raise BaselineError(f"cannot read the baseline {file}: {error.strerror or error}") from None
    except ValueError as error:
        raise BaselineError(f"the baseline {file} is not JSON: {error}") from None
    return parse(data, file)


def parse(data, file: Path) -> Counter[Entry]:
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("entries"), list):
        raise BaselineError(f"{file} is not a jaxmigrate baseline (version {VERSION}); write one with --write-baseline")
    entries: Counter[Entry] = Counter()
    for item in data["entries"]:
        try:
            code, path, source, count = item["code"], item["path"], item["source"], item["count"]
        except (KeyError, TypeError):
            raise BaselineError(f"{file}: an entry needs code, path, source and count: {item!r}") from None
        if not all(isinstance(v, str) for v in (code, path, source)) or type(count) is not int or count < 1:
            raise BaselineError(f"{file}: not a valid entry: {item!r}")
        entries[Entry(code, path, source)] += count
    return entries


@dataclass
class Filtered:
    new: list[Finding]  # not in the baseline: what the run reports
    baselined: int  # findings the baseline matched
    stale: Counter[Entry]  # entries (with how many of each) that matched no finding


def apply(findings: list[Finding], entries: Counter[Entry], anchor: Path, sources: SourceLines) -> Filtered:
    """The findings the baseline does not hold. Each entry matches up to ``count`` findings, the
    first ones in report order; then what is left on both sides is paired as ``unpaired`` says."""
    keys = [entry_of(finding, anchor, sources) for finding in findings]
    unmatched, stale = unpaired(Counter(keys), entries)
    new = []
    for finding, key in reversed(list(zip(findings, keys))):  # the last copies of a key are the new ones
        if unmatched[key] > 0:
            unmatched[key] -= 1
            new.append(finding)
    new.reverse()
    return Filtered(new, len(findings) - len(new), stale)


def unpaired(now: Counter[Entry], before: Counter[Entry]) -> tuple[Counter[Entry], Counter[Entry]]:
    """(entries of ``now`` not in ``before``, entries of ``before`` not in ``now``). Entries of
    the same code are paired first; then, of the rest, those of one rule and file whose code is
    still mostly the same (``SIMILAR``): a line that changed for another reason (``--fix``
    rewrote another finding on it) does not turn its finding into a new and a stale one, while
    new code in a file where another finding was fixed is still new."""
    added, gone = now - before, before - now
    pairs = []
    for new in added:
        for old in gone:
            if (new.code, new.path) == (old.code, old.path):
                ratio = difflib.SequenceMatcher(None, new.source, old.source).ratio()
                if ratio >= SIMILAR:
                    pairs.append((-ratio, new, old))
    for _, new, old in sorted(pairs):  # the most similar first
        times = min(added[new], gone[old])
        added[new] -= times
        gone[old] -= times
    return +added, +gone


# How much of a flagged line must be the same for it to be the finding it was (difflib's ratio):
# `jax.tree_map(lambda x: x[0], p)` and `jax.tree.map(lambda x: x[0], p)` are 0.98 alike.
SIMILAR = 0.8


def stale_summary(stale: Counter[Entry], baseline: Path, shown: int = 5) -> str:
    """One line for stderr, and the first few stale entries on lines of their own."""
    total = sum(stale.values())
    noun = "entry" if total == 1 else "entries"
    lines = [f"jaxmigrate: {total} baseline {noun} in {baseline} matched no finding (fixed, or the code changed);"
             f" run with --write-baseline {baseline} to drop {'it' if total == 1 else 'them'}"]
    for entry, count in sorted(stale.items())[:shown]:
        first = entry.source.split("\n", 1)[0]
        times = f" (x{count})" if count > 1 else ""
        lines.append(f"  {entry.code} {entry.path}: {first}{times}")
    if len(stale) > shown:
        lines.append(f"  ... and {len(stale) - shown} more")
    return "\n".join(lines) + "\n"
