"""Settings: ``[tool.jaxmigrate]`` in pyproject.toml (or a ``--config`` file), then CLI overrides."""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from jaxmigrate.files import DEFAULT_EXCLUDES
from jaxmigrate.pins import folders_up, project_pin
from jaxmigrate.lint import registry
from jaxmigrate.lint.fix_policy import FixPolicy

DEFAULT_TARGET_JAX = (0, 10)
# The oldest JAX worth migrating to: the fixes write jax.sharding's APIs, which came with 0.4.
# An older target would report nothing (nothing was deprecated yet) and look like a clean bill.
MIN_TARGET_JAX = (0, 4)
KNOWN_KEYS = {"select", "extend-select", "ignore", "per-file-ignores", "exclude", "extend-exclude", "target-jax",
              "from-jax", "line-length", "fixable", "unfixable", "extend-safe-fixes", "extend-unsafe-fixes",
              "respect-gitignore"}
LINE_LENGTHS = range(40, 401)
_VERSION = re.compile(r"^\s*(\d+)\.(\d+)(?:\.\d+)?\s*$")


class ConfigError(Exception):
    """Bad configuration: reported with exit code 2."""


@dataclass(frozen=True)
class Settings:
    root: Path  # the project root: where the config lives, or the working directory
    select: tuple[str, ...] = ("ALL",)
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDES
    extend_exclude: tuple[str, ...] = ()
    target_jax: tuple[int, int] = DEFAULT_TARGET_JAX
    # The JAX the code was written for (what it is migrated from): `from-jax`, else the lowest
    # version the project's requirements allow, else None (not known). See pins.py.
    from_jax: tuple[int, int] | None = None
    from_jax_source: str = ""  # where from_jax came from, for people reading the settings
    # The width rewritten lines keep to: `line-length`, else ruff's or black's in the same
    # pyproject.toml, else None (each file's own width is measured; see migrate/_layout.py).
    line_length: int | None = None
    # Which fixes may be applied, and how far they are trusted (lint/fix_policy.py).
    fix_policy: FixPolicy = FixPolicy()
    respect_gitignore: bool = True  # skip what .gitignore files ignore, as ruff does
    config_file: Path | None = None

    def rule_codes_for(self, path: Path) -> tuple[str, ...]:
        """Codes of the rules that run on ``path``: selected, minus its per-file ignores."""
        if not self.per_file_ignores:  # asked once per file: no path arithmetic when not needed
            return _selected_codes(registry.all_rules(), self.select, self.ignore)
        ignore = list(self.ignore)
        relative = _relative(path, self.root)
        for pattern, codes in self.per_file_ignores:
            if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(path.name, pattern):
                ignore.extend(codes)
        return _selected_codes(registry.all_rules(), self.select, tuple(ignore))

    def fingerprint(self) -> str:
        """Changes whenever a setting that changes findings changes (keys the cache), and with the
        tool itself: its version and its own source files."""
        from jaxmigrate import __version__

        payload = json.dumps(
            [__version__, tool_sources_digest(), self.select, self.ignore, self.per_file_ignores,
             self.target_jax, self.from_jax, list(vars(self.fix_policy).values())]
        )
        return hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()


@functools.lru_cache(maxsize=1)
def tool_sources_digest(package: Path = Path(__file__).parent) -> str:
    """Size and modification time of every module and data file of the package: an edited rule in
    a development (editable) install must not be answered from findings cached before the edit,
    and the version number does not change for that. A stat per file, no reading."""
    digest = hashlib.blake2b(digest_size=16)
    for path in sorted(package.rglob("*")):
        if path.suffix in (".py", ".toml") and "__pycache__" not in path.parts:
            stat = path.stat()
            digest.update(f"{path.relative_to(package).as_posix()}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()


@functools.lru_cache(maxsize=64)
def _selected_codes(rules: tuple, select: tuple[str, ...], ignore: tuple[str, ...]) -> tuple[str, ...]:
    # Asked once per file, and the answer depends on nothing else: select it once.
    return tuple(r.code for r in registry.select_rules(list(select), list(ignore)))


def parse_version(value: str, where: str, key: str = "target-jax") -> tuple[int, int]:
    # A TOML number is refused rather than read: `0.10` is the float 0.1, which would silently
    # mean JAX 0.1 (and hide every finding deprecated after it).
    if not isinstance(value, str):
        raise ConfigError(f'{where}: {key} must be a string like "0.10" (quoted), got {value!r}')
    match = _VERSION.match(value)
    if not match:
        raise ConfigError(f"{where}: {key} must look like 0.10, got {value!r}")
    return int(match.group(1)), int(match.group(2))


def find_config(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above ``start`` that has a [tool.jaxmigrate] table."""
    for folder in folders_up(start):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            tool = _read_toml(candidate).get("tool")
            if isinstance(tool, dict) and "jaxmigrate" in tool:
                return candidate
    return None


def load_settings(
    config_file: Path | None,
    start: Path,
    *,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    target_jax: str | None = None,
    from_jax: str | None = None,
    line_length: int | None = None,
    extend_select: list[str] | None = None,
    fixable: list[str] | None = None,
    unfixable: list[str] | None = None,
    respect_gitignore: bool | None = None,
) -> Settings:
    """Settings from the config file (given, or found from ``start``), with CLI values on top
    (``--extend-select`` adds to the file's, as ruff's does)."""
    config_file = config_file or find_config(start)
    table: dict = {}
    where = str(config_file) if config_file else "command line"
    if config_file is not None:
        table = _jaxmigrate_table(_read_toml(config_file), config_file.name == "pyproject.toml", where)
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) in [tool.jaxmigrate]: {', '.join(unknown)}"
            f" (known: {', '.join(sorted(KNOWN_KEYS))})"
        )
    root = config_file.parent.resolve() if config_file else Path.cwd().resolve()
    if from_jax is not None:
        written_for, source = parse_version(from_jax, "--from-jax", "from-jax"), "--from-jax"
    elif "from-jax" in table:
        written_for, source = parse_version(table["from-jax"], where, "from-jax"), f"{where}: from-jax"
    elif pin := project_pin(start):
        written_for, source = pin.version, pin.source
    else:
        written_for, source = None, ""
    target_where = "--target-jax" if target_jax is not None else where
    target = parse_version(target_jax if target_jax is not None else table.get("target-jax", "0.10"), target_where)
    given = from_jax is not None or "from-jax" in table
    _check_versions(target, target_where, written_for if given else None, "--from-jax" if from_jax is not None else where)
    settings = Settings(
        root=root,
        select=_codes(select if select is not None else table.get("select", ["ALL"]), where, "select")
        # A --select replaces the file's selection, its extend-select too (as ruff's does).
        + _codes(table.get("extend-select", []) if select is None else [], where, "extend-select")
        + _codes(extend_select or [], "--extend-select", "extend-select"),
        ignore=_codes(ignore if ignore is not None else table.get("ignore", []), where, "ignore"),
        per_file_ignores=_per_file_ignores(table.get("per-file-ignores", {}), where),
        exclude=_strings(table.get("exclude", list(DEFAULT_EXCLUDES)), where, "exclude"),
        extend_exclude=_strings(table.get("extend-exclude", []), where, "extend-exclude"),
        target_jax=target,
        from_jax=written_for,
        from_jax_source=source,
        line_length=_line_length(line_length, table, where, config_file, start),
        fix_policy=FixPolicy(
            fixable=_codes(fixable if fixable is not None else table.get("fixable", ["ALL"]), where, "fixable"),
            unfixable=_codes(unfixable if unfixable is not None else table.get("unfixable", []), where, "unfixable"),
            extend_safe=_codes(table.get("extend-safe-fixes", []), where, "extend-safe-fixes"),
            extend_unsafe=_codes(table.get("extend-unsafe-fixes", []), where, "extend-unsafe-fixes"),
        ),
        respect_gitignore=respect_gitignore if respect_gitignore is not None
        else _boolean(table.get("respect-gitignore", True), where, "respect-gitignore"),
        config_file=config_file,
    )
    return settings


def _check_versions(target: tuple[int, int], target_where: str, written_for: tuple[int, int] | None,
                    written_where: str) -> None:
    """The versions a user gave must describe a migration: onto a JAX this tool migrates to, from one
    no newer than that. (A project's pin newer than the target is not an error of the user's.)"""
    if target < MIN_TARGET_JAX:
        raise ConfigError(f"{target_where}: target-jax {_shown(target)} is older than {_shown(MIN_TARGET_JAX)},"
                          " the oldest JAX jaxmigrate migrates to")
    if written_for is not None and written_for > target:
        raise ConfigError(f"{written_where}: from-jax {_shown(written_for)} is newer than target-jax"
                          f" {_shown(target)}: the code would be migrated backwards")


def _shown(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def _line_length(given: int | None, table: dict, where: str, config_file: Path | None, start: Path) -> int | None:
    """``--line-length``, ``line-length``, or the formatter's: what the project's own tools keep to."""
    if given is not None:
        return _checked_length(given, "--line-length")
    if "line-length" in table:
        return _checked_length(table["line-length"], f"{where}: line-length")
    pyproject = config_file if config_file is not None and config_file.name == "pyproject.toml" else _nearest_pyproject(start)
    if pyproject is None:
        return None
    tool = _read_toml(pyproject).get("tool")
    for formatter in ("ruff", "black"):
        section = tool.get(formatter) if isinstance(tool, dict) else None
        value = section.get("line-length") if isinstance(section, dict) else None
        if type(value) is int and value in LINE_LENGTHS:
            return value
    return None


def _checked_length(value, where: str) -> int:
    if type(value) is not int or value not in LINE_LENGTHS:
        raise ConfigError(f"{where} must be a whole number from {LINE_LENGTHS.start} to {LINE_LENGTHS.stop - 1}, got {value!r}")
    return value


def _nearest_pyproject(start: Path) -> Path | None:
    for folder in folders_up(start):
        if (folder / "pyproject.toml").is_file():
            return folder / "pyproject.toml"
    return None


def _read_toml(path: Path) -> dict:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None
    except UnicodeDecodeError as error:  # TOML is UTF-8 by definition
        raise ConfigError(f"{path}: not UTF-8 (byte {error.start}): TOML files must be UTF-8") from None


def _jaxmigrate_table(document: dict, pyproject: bool, where: str) -> dict:
    """[tool.jaxmigrate] of a pyproject.toml; of a dedicated file, that table or the whole document."""
    tool = document.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{where}: [tool] must be a table")
    table = tool.get("jaxmigrate", {} if pyproject else document)
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [tool.jaxmigrate] must be a table, got {table!r}")
    return table


def _boolean(value, where: str, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {key} must be true or false, got {value!r}")
    return value


def _strings(value, where: str, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: {key} must be a list of strings")
    return tuple(value)


def _codes(value, where: str, key: str) -> tuple[str, ...]:
    codes = tuple(
        code.strip().upper()
        for item in _strings(value, where, key)
        for code in item.split(",")
        if code.strip()
    )
    unknown = [code for code in codes if not registry.known_code_or_prefix(code)]
    if unknown:
        raise ConfigError(
            f"{where}: unknown rule code(s) in {key}: {', '.join(unknown)}"
            " (see `jaxmigrate rules`)"
        )
    return codes


def _per_file_ignores(value, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: per-file-ignores must be a table of glob = [codes]")
    return tuple(
        (pattern, _codes(codes, where, f"per-file-ignores.{pattern!r}"))
        for pattern, codes in value.items()
    )


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()
