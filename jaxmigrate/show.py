"""``--show-settings`` and ``--show-files``: what a run would use, printed instead of running it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from jaxmigrate.config import Settings


def settings(settings: Settings, path: Path) -> str:
    """The settings ``path`` is checked with, one ``key = value`` a line, in the config's own
    names: where they came from, then every setting, then the rules that run on it."""
    policy = settings.fix_policy
    version = lambda v: "not known" if v is None else f"{v[0]}.{v[1]}"  # noqa: E731
    lines = [
        f"Resolved settings for: {path}",
        f"Settings path: {settings.config_file or 'none (defaults)'}",
        "",
        f"root = {settings.root}",
        f"select = {_toml(settings.select)}",
        f"ignore = {_toml(settings.ignore)}",
        f"per-file-ignores = {json.dumps({p: list(c) for p, c in settings.per_file_ignores})}",
        f"fixable = {_toml(policy.fixable)}",
        f"unfixable = {_toml(policy.unfixable)}",
        f"extend-safe-fixes = {_toml(policy.extend_safe)}",
        f"extend-unsafe-fixes = {_toml(policy.extend_unsafe)}",
        f"exclude = {_toml(settings.exclude)}",
        f"extend-exclude = {_toml(settings.extend_exclude)}",
        f"respect-gitignore = {str(settings.respect_gitignore).lower()}",
        f"target-jax = {version(settings.target_jax)}",
        f"from-jax = {version(settings.from_jax)}" + (f"  ({settings.from_jax_source})" if settings.from_jax_source else ""),
        f"line-length = {settings.line_length or 'each file its own'}",
        f"rules = {_toml(settings.rule_codes_for(path))}",
    ]
    return "\n".join(lines) + "\n"


def files(paths: Sequence[Path]) -> str:
    return "".join(f"{path.as_posix()}\n" for path in sorted(paths))


def _toml(values) -> str:
    return json.dumps(list(values))
