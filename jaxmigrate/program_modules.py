"""The program's other modules, found from the file being checked as Python's import finds them.

A check is per file (in a pool, cached per file), yet some of what a file means lives in the modules
it imports: the ``replicate`` helper of the program's own ``utils.py``. While a file on disk is
processed (``reading(path)``, set by the engine), ``find(qualified)`` returns the module a dotted
name of that file's imports points to, looked up where Python looks when the program runs:

* a relative import (``from . import utils``, ``from .utils import replicate``) from the importing
  file's package;
* an absolute one (``import utils``, ``from mypkg.utils import replicate``) from the importing
  file's own folder (a script's ``sys.path[0]``) and from the folder above its package (the top of
  its ``__init__.py`` chain, where a package's modules are imported from).

Installed libraries are never read (lint imports nothing and reads only the user's tree): a name
whose top package is a library this tool knows by its API (jax, flax, numpy, ...) is not looked up.

``definition(qualified)`` goes one step further: the module-level binding the name has there,
parsed once per content, through re-exports (``from .common import replicate`` in ``utils.py``).

Every module file looked for is recorded with the digest of its bytes (or as absent), so a cached
result of the importing file is used only while those files are as they were (``cache``).
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from jaxmigrate.files import SourceError, decode, read_bytes

ABSENT = "-"  # the digest recorded for a module file that is not there
MAX_REEXPORTS = 4  # `from .common import replicate` in utils.py, followed this many modules deep
MAX_BYTES = 2_000_000  # a module bigger than this is not read for another file's sake
LIBRARIES = frozenset({
    "jax", "jaxlib", "flax", "optax", "haiku", "chex", "numpy", "scipy", "tensorflow", "tf", "torch",
    "functools", "itertools", "collections", "builtins", "math", "os", "sys", "typing", "dataclasses",
})


@dataclass(frozen=True)
class Module:
    """A module of the program another file imports: where it is, its text, and its package."""

    path: Path
    digest: str
    text: str


@dataclass(frozen=True)
class Definition:
    """A module-level name of another module of the program, and its one binding there."""

    module: object  # the core.module.ParsedModule of that file
    path: Path
    name: str
    binding: object  # a names.Binding


@dataclass
class Reading:
    """The file being processed, and the module files read (or looked for) on its behalf."""

    path: Path
    read: dict[str, str] = field(default_factory=dict)  # module file -> digest (ABSENT: not there)
    # Each module file read once per file processed: its analysis asks again at every call site
    # and on every round, and the digest must be the one of the bytes its findings came from.
    modules: dict[str, Module | None] = field(default_factory=dict)
    stars: dict[tuple, str | None] = field(default_factory=dict)  # (module, name, importer) -> star_binding


_reading: ContextVar[Reading | None] = ContextVar("jaxmigrate_program_modules", default=None)


@contextmanager
def reading(path: str | Path) -> Iterator[Reading]:
    """While the file at ``path`` is checked or fixed: what it imports is looked up from there."""
    current = Reading(Path(path).absolute())
    token = _reading.set(current)
    try:
        yield current
    finally:
        _reading.reset(token)


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


def digest_of(path: str) -> str:
    """The digest ``Reading.read`` holds for ``path`` as it now is."""
    try:
        return digest(read_bytes(path))
    except OSError:
        return ABSENT


def find(qualified: str, importer: Path | None = None) -> tuple[Module, str] | None:
    """The module that defines the last part of ``qualified`` (``utils.replicate``: ``utils.py``
    and ``"replicate"``), imported from ``importer`` (by default the file being processed), or
    None where no file of the program defines it."""
    current = _reading.get()
    if current is None:
        return None
    importer = importer or current.path
    stripped = qualified.lstrip(".")
    level = len(qualified) - len(stripped)
    parts = stripped.split(".")
    if len(parts) < 2 and not level or not all(parts) or not level and parts[0] in LIBRARIES:
        return None
    module_parts, attribute = parts[:-1], parts[-1]
    if level:
        base = importer.parent
        for _ in range(level - 1):
            base = base.parent
        roots = [base]
    else:
        roots = list(dict.fromkeys([importer.parent, _package_root(importer)]))
    for root in roots:
        folder = root.joinpath(*module_parts)
        for candidate in (folder.with_suffix(".py") if module_parts else None, folder / "__init__.py"):
            if candidate is None:
                continue
            module = _read(candidate, current)
            if module is not None:
                return module, attribute
    return None


def _package_root(path: Path) -> Path:
    """The folder a module's top package is imported from: above the last ``__init__.py`` folder."""
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        folder = folder.parent
    return folder


def _read(path: Path, current: Reading) -> Module | None:
    key = str(path)
    if key not in current.modules:
        current.modules[key] = _read_once(path, key, current)
    return current.modules[key]


def _read_once(path: Path, key: str, current: Reading) -> Module | None:
    try:
        raw = read_bytes(path)
    except OSError:
        current.read[key] = ABSENT
        return None
    current.read[key] = digest(raw)
    if len(raw) > MAX_BYTES:
        return None
    try:
        return Module(path, current.read[key], decode(raw, key).text)
    except SourceError:
        return None


def definition(qualified: str, importer: Path | None = None, depth: int = 0) -> Definition | None:
    """What ``qualified`` (a name the file being processed imports) is bound to at module level in
    the program's module that defines it, followed through imports of that module (re-exports);
    None where it is not one module-level binding of the program's own files."""
    from jaxmigrate.names import ImportBinding

    found = _parsed_module_of(qualified, importer)
    if found is None:
        return None
    source, module, name = found
    bindings = module.names.module_scope.bindings.get(name, [])
    if len(bindings) != 1:
        return None
    if isinstance(bindings[0], ImportBinding):
        return definition(bindings[0].qualname, source.path, depth + 1) if depth < MAX_REEXPORTS else None
    return Definition(module, source.path, name, bindings[0])


def _parsed_module_of(qualified: str, importer: Path | None):
    """(the program's module that defines the last part of ``qualified``, that module parsed, the
    last part), or None where no file of the program defines it or it does not parse."""
    found = find(qualified, importer)
    if found is None:
        return None
    source, name = found
    module = parsed(source)
    return None if module is None else (source, module, name)


NOT_EXPORTED = ""  # what `star_binding` answers for a name the module's star import does not bind


def star_binding(module: str, name: str, importer: Path | None = None, depth: int = 0) -> str | None:
    """What ``name`` is in a file that says ``from <module> import *`` and binds ``name`` nowhere
    itself: the qualified name it gets from the program's module (``jax`` where ``utils.py`` says
    ``import jax``, ``utils.replicate`` where it defines ``replicate``), ``NOT_EXPORTED`` where
    that module's star import cannot bind it (no such module-level name, a private one, one its
    ``__all__`` leaves out), or None where that is not known (the module is not a file of the
    program, does not parse, or computes its ``__all__``)."""
    current = _reading.get()
    if current is None or not name.isidentifier() or depth > MAX_REEXPORTS:
        return None
    key = (module, name, importer)
    if key not in current.stars:
        current.stars[key] = _star_binding(module, name, importer, depth)
    return current.stars[key]


def _star_binding(module: str, name: str, importer: Path | None, depth: int) -> str | None:
    from jaxmigrate.names import ImportBinding

    found = _parsed_module_of(f"{module}.{name}", importer)
    if found is None:
        return None
    source, parsed_module, _ = found
    resolver = parsed_module.names
    exported = _all_names(parsed_module.tree)
    if exported is None:
        return None
    if name.startswith("_") if exported is EVERY_PUBLIC else name not in exported:
        return NOT_EXPORTED
    bindings = resolver.module_scope.bindings.get(name, [])
    if not bindings:  # perhaps through that module's own star imports
        answers = [star_binding(inner, name, source.path, depth + 1) for inner in resolver.star_imports]
        if any(answer is None for answer in answers):
            return None
        bound = {answer for answer in answers if answer}
        return bound.pop() if len(bound) == 1 else None if bound else NOT_EXPORTED
    qualified = {binding.qualname if isinstance(binding, ImportBinding) else None for binding in bindings}
    if qualified == {None}:  # defined there: the name as an import of it would be bound
        return f"{module}.{name}"
    return qualified.pop() if len(qualified) == 1 and None not in qualified else None


EVERY_PUBLIC = object()  # a module without `__all__`: its star import binds every name not starting with `_`


def _all_names(tree) -> frozenset[str] | object | None:
    """The names a star import of the module binds: its literal ``__all__``, ``EVERY_PUBLIC``
    where it has none, None where ``__all__`` is computed (``__all__ += ...``, a call)."""
    assigned = [node for node in tree.body if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                and any(isinstance(t, ast.Name) and t.id == "__all__"
                        for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))]
    if not assigned:
        return EVERY_PUBLIC
    if len(assigned) > 1 or not isinstance(assigned[0], ast.Assign):
        return None
    value = assigned[0].value
    if not isinstance(value, (ast.List, ast.Tuple)) or not all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts):
        return None
    return frozenset(e.value for e in value.elts)


_PARSED: dict[str, object] = {}  # path:digest -> ParsedModule (None: not Python): each read once a worker


def parsed(source: Module):
    """``source`` parsed (a core.module.ParsedModule, whose ``shared`` holds analyses of it), or None."""
    from jaxmigrate.core.module import ParsedModule

    key = f"{source.path}:{source.digest}"
    if key not in _PARSED:
        if len(_PARSED) > 256:
            _PARSED.clear()
        try:
            _PARSED[key] = ParsedModule(source.text)
        except (SyntaxError, ValueError, RecursionError):
            _PARSED[key] = None
    return _PARSED[key]
