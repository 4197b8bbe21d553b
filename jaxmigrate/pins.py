"""The JAX a project's code was written for: the lowest version its own requirements allow.

This is the default of ``from-jax`` (see ``config.py``): a rule about a default that changed (JM506,
``make_mesh``'s axis types) fires only for code written before the change. Read from the project's
declared requirements, never from what happens to be installed: the installed JAX is the one being
migrated *to*, and importing it is not allowed in lint anyway.

Sources, in the nearest folder at or above the start that requires ``jax`` at all (up to the
repository's root): ``pyproject.toml`` (``[project]`` dependencies and optional dependencies),
``requirements*.txt``, ``setup.cfg`` (``install_requires``, ``extras_require``) and the string
literals of ``setup.py``. Of several requirements the lowest allowed version wins: the code has to
work there too.
"""

from __future__ import annotations

import ast
import configparser
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

_REQUIREMENT = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?P<rest>.*)$")
_SPECIFIER = re.compile(r"^\s*(?P<op>===|==|~=|!=|<=|>=|<|>)\s*(?P<version>\d+(?:\.\d+)*)")
_LOWER_BOUNDS = frozenset({"===", "==", "~=", ">=", ">"})
_UPPER_BOUNDS = frozenset({"<", "<="})
# What a project allows when it only caps jax (`jax<0.5`): some version before the cap, exactly
# which one unknown; rules only ask whether it is before a change, which the cap answers.
ANY_BEFORE = (0, 0)


@dataclass(frozen=True)
class Pin:
    version: tuple[int, int]  # the lowest (major, minor) the requirement allows
    source: str  # where it was read: "requirements.txt: jax==0.4.30"
    release: str = ""  # that lowest version as written ("0.4.30"): what `verify --old-jax` installs


def lowest_allowed(requirement: str) -> tuple[int, int] | None:
    """The lowest (major, minor) of jax that a PEP 508 requirement allows; None when it is not a
    requirement on jax or sets no bound (``jax``, ``jax @ https://...``, ``jax!=0.4.1``).

    >>> lowest_allowed("jax[cpu]~=0.4.30"), lowest_allowed("jax>=0.4,<0.5"), lowest_allowed("jaxlib==0.4")
    ((0, 4), (0, 4), None)
    """
    match = _REQUIREMENT.match(requirement.split(";", 1)[0])
    if not match or re.sub(r"[-_.]+", "-", match.group("name")).lower() != "jax":
        return None
    rest = match.group("rest").strip().strip("()")
    lower: list[tuple[int, int]] = []
    capped = False
    for part in rest.split(","):
        spec = _SPECIFIER.match(part)
        if spec is None:
            continue
        numbers = tuple(int(n) for n in spec.group("version").split("."))
        version = (numbers + (0,))[:2]
        if spec.group("op") in _LOWER_BOUNDS:
            lower.append(version)
        elif spec.group("op") in _UPPER_BOUNDS:
            capped = True
    if lower:
        return max(lower)  # every specifier must hold: the highest lower bound is the lowest allowed
    return ANY_BEFORE if capped else None


def lowest_release(requirement: str) -> str:
    """The version written in the requirement's lowest bound (``"0.4.30"`` of ``jax>=0.4.30,<0.5``),
    or "" when it has none."""
    if lowest_allowed(requirement) in (None, ANY_BEFORE):
        return ""
    rest = _REQUIREMENT.match(requirement.split(";", 1)[0]).group("rest").strip().strip("()")
    bounds = [spec for part in rest.split(",") if (spec := _SPECIFIER.match(part)) and spec.group("op") in _LOWER_BOUNDS]
    best = max(bounds, key=lambda spec: tuple(int(n) for n in spec.group("version").split(".")))
    return best.group("version")


def folders_up(start: Path) -> list[Path]:
    """``start`` (a folder, or a file's folder) and every folder above it, nearest first: where a
    project's settings and requirements are looked for."""
    start = start.resolve()
    return [start, *start.parents] if start.is_dir() else list(start.parents)


def project_pin(start: Path) -> Pin | None:
    """The lowest jax version the requirements of the project holding ``start`` allow, or None."""
    for folder in folders_up(start):
        pins = [
            Pin(version, f"{path.name}: {requirement}", lowest_release(requirement))
            for path, requirement in _requirements(folder)
            if (version := lowest_allowed(requirement)) is not None
        ]
        if pins:
            return min(pins, key=lambda pin: pin.version)
        if (folder / ".git").exists():  # the repository's root: above it is another project
            return None
    return None


def _requirements(folder: Path):
    """(file, requirement string) of every requirement the folder's project files declare. A file
    that cannot be read or parsed declares nothing: this is a default, not a check of the files."""
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        try:
            project = tomllib.loads(pyproject.read_text("utf-8")).get("project", {})
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            project = {}
        if isinstance(project, dict):
            extras = project.get("optional-dependencies", {})
            groups = [project.get("dependencies", []), *(extras.values() if isinstance(extras, dict) else ())]
            for group in groups:
                for item in group if isinstance(group, list) else ():
                    if isinstance(item, str):
                        yield pyproject, item
    for path in sorted(folder.glob("requirements*.txt")):
        for line in _lines(path):
            if not line.startswith("-"):  # -r other.txt, -e ., --index-url ...
                yield path, line
    setup_cfg = folder / "setup.cfg"
    if setup_cfg.is_file():
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(setup_cfg.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, configparser.Error):
            parser = configparser.ConfigParser()
        values = [parser.get("options", "install_requires", fallback="")]
        if parser.has_section("options.extras_require"):
            values += [value for _, value in parser.items("options.extras_require")]
        for value in values:
            for line in value.splitlines():
                if line.strip():
                    yield setup_cfg, line.strip()
    setup_py = folder / "setup.py"
    if setup_py.is_file():
        try:
            tree = ast.parse(setup_py.read_bytes())
        except (OSError, SyntaxError, ValueError):
            tree = ast.Module(body=[], type_ignores=[])
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield setup_py, node.value


def _lines(path: Path) -> list[str]:
    try:
        text = path.read_text("utf-8", errors="replace")
    except OSError:
        return []
    lines = (re.sub(r"(^|\s)#.*", "", line).strip() for line in text.splitlines())
    return [line for line in lines if line]
