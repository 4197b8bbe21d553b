"""Findings cached by content hash + tool version + settings, in ``.jaxmigrate_cache/``.

A file whose findings read other modules of the program (``program_modules``: a helper imported
from ``utils.py``) is stored with those modules' digests, and its entry is used only while every
one of them is as it was.

JSON rather than pickle: the cache lives inside the user's checkout, and unpickling a file that
someone committed or planted there would run arbitrary code.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Sequence

from jaxmigrate import program_modules
from jaxmigrate.core.edits import Edit
from jaxmigrate.files import read_bytes
from jaxmigrate.lint.findings import Blocker, Finding, Fix, Safety

CACHE_DIR = ".jaxmigrate_cache"
FORMAT = 5  # 3: a fix's fallback and whole-module flag; 4: blockers; 5: the modules a file's findings read
MAX_STALE = 5000


class FindingsCache:
    def __init__(self, file: Path | None, entries: dict[str, list]) -> None:
        self.file = file
        self.entries = entries
        self.dirty = False
        self._used: set[str] = set()
        self.read: dict[str, dict[str, str]] = {}  # key -> the modules its cached entry depends on

    @classmethod
    def open(cls, root: Path, fingerprint: str) -> "FindingsCache":
        folder = root / CACHE_DIR
        file = folder / f"findings-{FORMAT}-{fingerprint}.json"
        try:
            entries = json.loads(file.read_text(encoding="utf-8"))
            if not isinstance(entries, dict):
                entries = {}
        except (OSError, ValueError):
            entries = {}
        return cls(file, entries)

    def lookup(
        self, path: Path, display: str, codes: Sequence[str], target: tuple[int, int]
    ) -> tuple[str | None, list[Finding] | None]:
        """(key, findings): the key to store under later, and the cached findings if any."""
        try:
            data = read_bytes(path)  # not Path.read_bytes: a FIFO named as a file would hang it
        except OSError:
            return None, None
        digest = hashlib.blake2b(data, digest_size=20)
        digest.update(json.dumps([display, list(codes), target]).encode())
        key = digest.hexdigest()
        self._used.add(key)
        cached = self.entries.get(key)
        if cached is None:
            return key, None
        try:
            items, read = (cached["findings"], cached["read"]) if isinstance(cached, dict) else (cached, {})
            if not (isinstance(read, dict) and all(isinstance(d, str) for d in read.values())):
                raise ValueError("not the modules a file read")
            if any(program_modules.digest_of(module) != was for module, was in read.items()):
                return key, None  # a module it imports changed: work it out again
            self.read[key] = read
            return key, [_finding(item, display) for item in items]
        except (KeyError, TypeError, ValueError):
            return key, None  # an entry this version did not write as it is: work it out again

    def store(self, key: str, findings: list[Finding], read: dict[str, str] | None = None) -> None:
        """``read``: the module files (and digests) the findings depend on besides the file itself;
        None keeps those the entry looked up under ``key`` had (a file served from the cache)."""
        read = self.read.get(key, {}) if read is None else read
        items = [_plain(f) for f in findings]
        value = {"findings": items, "read": read} if read else items
        if self.entries.get(key) != value:
            self.entries[key] = value
            self.dirty = True

    def save(self) -> None:
        if self.file is None:
            return
        if not self.dirty:
            return
        # Every edit of a file leaves its old entry behind; entries of files outside this run's
        # paths can't be told from stale ones, so prune only once stale ones clearly dominate.
        if len(self.entries) > 2 * len(self._used) + MAX_STALE:
            self.entries = {k: v for k, v in self.entries.items() if k in self._used}
        try:
            folder = self.file.parent
            folder.mkdir(exist_ok=True)
            gitignore = folder / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("# Created by jaxmigrate\n*\n", encoding="utf-8")
            tmp = self.file.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self.entries, separators=(",", ":")), encoding="utf-8")
            os.replace(tmp, self.file)
        except OSError:
            pass  # a read-only checkout still gets its findings, just no cache


def _plain(finding: Finding) -> list:
    return [
        finding.code, finding.message, finding.path, finding.line, finding.column,
        finding.end_line, finding.end_column, _plain_fix(finding.fix), finding.cell,
        [[b.scope, b.reason, b.line] for b in finding.blockers],
    ]


def _plain_fix(fix: Fix | None) -> list | None:
    if fix is None:
        return None
    return [fix.safety.value, fix.message, [[e.start, e.end, e.content] for e in fix.edits], fix.codemod,
            _plain_fix(fix.fallback), fix.whole_module]


def _finding(item: list, path: str) -> Finding:
    """The finding an entry holds, or ValueError/TypeError when any value is not of the type
    (and range) a finding has: the key may match an entry that was edited or planted."""
    code, message, stored_path, line, column, end_line, end_column, fix, cell, blockers = item
    if not (isinstance(code, str) and isinstance(message, str) and stored_path == path):
        raise ValueError("not a finding of this file")
    if not all(_positive(n) for n in (line, column, end_line, end_column)) or not (cell is None or _positive(cell)):
        raise ValueError("a position is not a positive integer")
    return Finding(code, message, path, line, column, end_line, end_column, _fix(fix), cell,
                   tuple(_blocker(*b) for b in blockers))


def _blocker(scope, reason, line) -> Blocker:
    if not (isinstance(scope, str) and isinstance(reason, str) and (line is None or _positive(line))):
        raise ValueError("not a blocker")
    return Blocker(scope, reason, line)


def _fix(fix: list | None) -> Fix | None:
    """The fix an entry holds (with the fallback behind it), checked as ``_finding`` checks."""
    if fix is None:
        return None
    safety, message, edits, codemod, fallback, whole_module = fix
    if not isinstance(message, str) or not isinstance(edits, list) or not isinstance(whole_module, bool):
        raise ValueError("not a fix")
    # Only a name of this package: --fix imports a codemod by its name.
    if codemod is not None and not (isinstance(codemod, str) and codemod.startswith("jaxmigrate.")):
        raise ValueError("not a codemod of jaxmigrate")
    checked = []
    for start, end, content in edits:
        if not (_natural(start) and _natural(end) and start <= end and isinstance(content, str)):
            raise ValueError("not an edit")
        checked.append(Edit(start, end, content))
    return Fix(Safety(safety), message, tuple(checked), codemod, _fix(fallback), whole_module)


def _natural(value) -> bool:
    return type(value) is int and value >= 0


def _positive(value) -> bool:
    return type(value) is int and value >= 1
