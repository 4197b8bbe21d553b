"""Files in and out: discovery (.gitignore, excludes), decoding (cookie, BOM, line endings kept
as they are) and atomic writes that keep encoding, BOM, line endings and mode."""

from __future__ import annotations

import codecs
import contextlib
import errno
import hashlib
import io
import os
import re
import stat
import tempfile
import tokenize
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

if TYPE_CHECKING:
    import pathspec

PYTHON_SUFFIXES = (".py", ".pyi")
NOTEBOOK_SUFFIX = ".ipynb"  # Jupyter notebooks: their code cells are checked (notebooks.py)
CHECKED_SUFFIXES = (*PYTHON_SUFFIXES, NOTEBOOK_SUFFIX)
DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "build", "dist", "__pycache__",
    "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".jaxmigrate_cache",
    "*.egg-info", ".eggs", "site-packages",
)


class SourceError(Exception):
    """A file that cannot be read or decoded; reported as JM000 with this message, at ``line`` and
    ``column`` (1-based; where decoding failed, else the file's start)."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.line, self.column = line, column


@dataclass(frozen=True)
class SourceFile:
    text: str  # decoded, BOM removed, line endings exactly as in the file
    encoding: str  # the codec to write it back with ("utf-8-sig" keeps a BOM)


def decode(raw: bytes, name: str = "<file>") -> SourceFile:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as error:  # a bad coding cookie, or a BOM that contradicts it
        if "invalid or missing encoding declaration" in str(error):
            # detect_encoding decodes the first two lines itself and blames invalid UTF-8 there
            # on the declaration: say where the bad byte is when that is what it found.
            fallback = "utf-8-sig" if raw.startswith(codecs.BOM_UTF8) else "utf-8"
            try:
                raw.decode(fallback)
            except UnicodeDecodeError as bad:
                raise _decode_error(name, fallback, bad) from None
        raise SourceError(f"cannot decode {name}: {error}") from None
    try:
        text = raw.decode(encoding)
    except LookupError as error:
        raise SourceError(f"cannot decode {name} as {encoding}: {error}") from None
    except UnicodeDecodeError as error:
        raise _decode_error(name, encoding, error) from None
    return SourceFile(text, encoding)


def _decode_error(name: str, encoding: str, error: UnicodeDecodeError) -> SourceError:
    """Where decoding failed, as Python's own "(unicode error)" says: the line, and the column in
    characters of the part of that line that did decode."""
    data = error.object  # for utf-8-sig: the bytes after the BOM, which ``error.start`` indexes
    line_start = data.rfind(b"\n", 0, error.start) + 1
    line = data.count(b"\n", 0, error.start) + 1
    column = len(data[line_start : error.start].decode(encoding, errors="replace")) + 1
    return SourceError(
        f"cannot decode {name} as {encoding}: {error} (line {line}, column {column})", line, column
    )


def read_bytes(path: str | Path) -> bytes:
    """A regular file's bytes. Anything else named as a file (a FIFO, a device, a socket) is an
    OSError, raised before it is read: reading a FIFO waits for a writer, forever. Opened without
    blocking and tested on the open file, so nothing swapped in after a check is read either."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else (
                "a socket" if stat.S_ISSOCK(mode) else "not a file")
            raise OSError(errno.EINVAL, f"not a regular file ({kind}); skipped", str(path))
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as handle:
            fd = -1
            return handle.read()
    finally:
        if fd >= 0:
            os.close(fd)


def link_outside(path: str | Path, root: str | Path) -> str | None:
    """Where ``path`` leads when it is a symlink (or under one) to a file outside ``root``; None
    otherwise. --fix does not write through such a link, as ruff does not: the file it reaches
    belongs to another tree, which the user did not ask to change."""
    target = os.path.realpath(path)
    if os.path.abspath(path) == target:
        return None
    top = os.path.realpath(root)
    return None if target == top or target.startswith(top.rstrip(os.sep) + os.sep) else target


def read_source(path: Path) -> SourceFile:
    try:
        raw = read_bytes(path)
    except OSError as error:
        raise SourceError(f"cannot read {path}: {error.strerror or error}") from None
    return decode(raw, str(path))


def encode(source: SourceFile, new_text: str) -> bytes:
    try:
        return new_text.encode(source.encoding)
    except UnicodeEncodeError as error:
        raise SourceError(
            f"the fixed text cannot be written back as {source.encoding}: {error}"
        ) from None


class ReadOnlyFile(PermissionError):
    pass


class FileChanged(Exception):
    """The file on disk is no longer the bytes the new contents were made from."""


def fingerprint(data: bytes) -> bytes:
    """What ``write_atomic`` compares a file with: a digest, so that nobody keeps a file's bytes
    through its parse (a 1.4 MB file's bytes alive during it cost the parse 45 MB of heap)."""
    return hashlib.blake2b(data, digest_size=32).digest()


def write_atomic(path: Path, data: bytes, expected: bytes | None = None) -> None:
    """Replace ``path``'s contents all at once: a reader (or a crash) sees the old or the new
    file, never a half-written one. Symlinks are followed so the link itself survives.

    With ``expected`` (a ``fingerprint``), only if the file still holds the bytes ``data`` was
    made from, checked just before the replace: an edit saved meanwhile is never overwritten."""
    target = Path(os.path.realpath(path))
    mode = stat.S_IMODE(target.stat().st_mode)
    # Replacing the file would succeed in a writable folder whatever the file's own mode (and
    # for root, always): a file without write permission is one its owner asked to keep as is.
    if not mode & 0o222 or not os.access(target, os.W_OK):
        raise ReadOnlyFile(errno.EACCES, "the file is read-only", str(path))
    # Named for remove_abandoned_temp_files: hidden, the writer's pid, mkstemp's 8 characters.
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.{os.getpid()}.", suffix=".jaxmigrate")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if expected is not None and fingerprint(target.read_bytes()) != expected:
            raise FileChanged(str(path))
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


TEMP_FILE = re.compile(r"\.(?P<name>.+)\.(?P<pid>[0-9]+)\.[a-z0-9_]{8}\.jaxmigrate")


def remove_abandoned_temp_files(folders: Iterable[Path]) -> None:
    """Delete the temp files of write_atomic that a killed run left in ``folders``: only names it
    gives, and only when the process that made one is gone (another run may be writing now)."""
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            match = TEMP_FILE.fullmatch(entry.name) if entry.name.endswith(".jaxmigrate") else None
            if match and not _process_exists(int(match.group("pid"))):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process, or a pid we cannot ask about: leave its file
    return True


def _once_each(paths: Iterable[Path]) -> list[Path]:
    """``paths`` with each file once: a symlink (or hard link) to a file already in the list is
    the same file, which would be reported twice and, with --fix, rewritten twice. A file is
    kept under its own name rather than a link's. One stat per file (~2 us), no realpath."""
    chosen: dict[object, Path] = {}
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            chosen[path] = path  # missing or unreadable: reported by name later
            continue
        identity = (info.st_dev, info.st_ino)
        if identity not in chosen or chosen[identity].is_symlink() and not path.is_symlink():
            chosen[identity] = path
    return list(chosen.values())


class Discovery:
    """Walks the given paths: directories recursed (default excludes, config excludes and every
    .gitignore on the way respected), explicit files always kept unless ``force_exclude``."""

    def __init__(
        self,
        root: Path,
        exclude: Iterable[str] = DEFAULT_EXCLUDES,
        extend_exclude: Iterable[str] = (),
        force_exclude: bool = False,
        respect_gitignore: bool = True,
    ) -> None:
        self.root = root.resolve()
        self._exclude_patterns = [*exclude, *extend_exclude]
        self.force_exclude = force_exclude
        self.respect_gitignore = respect_gitignore
        self._gitignores: dict[Path, pathspec.PathSpec | None] = {}
        self._chains: dict[Path, tuple[tuple[Path, pathspec.PathSpec], ...]] = {}
        self._tops: dict[tuple, str] = {}  # (spec, base, named) -> the folder prefix paths match below

    @cached_property
    def excludes(self) -> pathspec.PathSpec:
        # Built (and pathspec imported, a fifth of the start-up) only when a path is matched:
        # checking the files named on the command line matches none.
        import pathspec

        return pathspec.GitIgnoreSpec.from_lines(self._exclude_patterns)

    def files(self, paths: Iterable[Path]) -> list[Path]:
        found: dict[Path, None] = {}
        for path in paths:
            if path.is_dir():
                for file in self._walk(path):
                    found.setdefault(file)
            elif self.force_exclude and self.is_excluded(path, is_dir=False):
                continue
            else:
                # An explicit file is checked whatever its suffix: the user asked for it. A
                # missing one surfaces later as JM000 "cannot read", not as a silent skip.
                found.setdefault(path)
        return _once_each(found)

    def is_excluded(self, path: Path, is_dir: bool, named: Path | None = None) -> bool:
        """Whether ``path`` is excluded. ``named`` is the (absolute) directory the user named
        that the walk started from: the user asked for it, so a pattern that excludes that very
        directory (`/versions` in a .gitignore above it, `fixtures` in extend-exclude) does not
        exclude its contents; they are matched as if it were the top instead."""
        absolute = path.resolve() if not path.is_absolute() else path
        suffix = "/" if is_dir else ""
        if self._matches(self.excludes, absolute, self.root, named, suffix) or self.excludes.match_file(
            absolute.name + suffix
        ):
            return True
        if self.respect_gitignore and self._gitignored(absolute, suffix, named):
            return True
        return False

    def _matches(self, spec: pathspec.PathSpec, path: Path, base: Path, named: Path | None, suffix: str) -> bool:
        """Whether ``spec`` (patterns relative to ``base``) matches ``path``; below a ``named``
        directory that the spec itself matches, relative to that directory instead."""
        key = (id(spec), base, named)
        top = self._tops.get(key)
        if top is None:  # once per spec and walk, not once per file
            if named is not None and named != base and base in named.parents:
                if spec.match_file(named.relative_to(base).as_posix() + "/"):
                    base = named
            top = self._tops[key] = str(base).rstrip(os.sep) + os.sep
        text = str(path)
        if not text.startswith(top):
            return False
        relative = text[len(top):]
        return spec.match_file((relative.replace(os.sep, "/") if os.sep != "/" else relative) + suffix)

    def _walk(self, directory: Path) -> Iterator[Path]:
        named = directory.resolve()
        stack = [directory]
        while stack:
            current = stack.pop()
            try:
                entries = sorted(os.scandir(current), key=lambda e: e.name)
            except OSError:
                continue
            subdirs = []
            for entry in entries:
                path = Path(entry.path)
                if entry.is_dir(follow_symlinks=False):
                    if not self.is_excluded(path, is_dir=True, named=named):
                        subdirs.append(path)
                elif entry.name.endswith(CHECKED_SUFFIXES) and entry.is_file():
                    if not self.is_excluded(path, is_dir=False, named=named):
                        yield path
            stack.extend(reversed(subdirs))

    def _gitignored(self, path: Path, suffix: str, named: Path | None) -> bool:
        return any(self._matches(spec, path, folder, named, suffix) for folder, spec in self._specs_above(path.parent))

    def _specs_above(self, folder: Path) -> tuple[tuple[Path, pathspec.PathSpec], ...]:
        """The .gitignore specs that apply below ``folder``: its own and its parents', up to the
        repository's top. Cached per folder: a walk asks once per file otherwise."""
        specs = self._chains.get(folder)
        if specs is None:
            spec = self._gitignore_in(folder)
            own = ((folder, spec),) if spec is not None else ()
            top = (folder / ".git").exists() or folder == folder.parent
            specs = own if top else own + self._specs_above(folder.parent)
            self._chains[folder] = specs
        return specs

    def _gitignore_in(self, folder: Path) -> pathspec.PathSpec | None:
        if folder not in self._gitignores:
            try:
                lines = (folder / ".gitignore").read_text(encoding="utf-8", errors="replace")
            except OSError:
                self._gitignores[folder] = None
            else:
                import pathspec

                self._gitignores[folder] = pathspec.GitIgnoreSpec.from_lines(lines.splitlines())
        return self._gitignores[folder]
