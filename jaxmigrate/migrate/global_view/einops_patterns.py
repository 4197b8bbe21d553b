"""einops patterns that add or remove pmap's device axis, and what they are in the global view.

``rearrange(x, "(d b) c h w -> d b h w c", d=n)`` splits the batch into ``n`` runs of rows, one
per device, and rearranges the rest of each row. Device ``i`` gets rows ``i*b .. (i+1)*b``,
rearranged; a global array of all rows, rearranged the same way (``"b c h w -> b h w c"``) and
laid out over the mesh, holds exactly those on device ``i``. ``repeat(x, "... -> d ...", d=n)``
copies ``x`` once per device: a replicate.
"""

from __future__ import annotations

import ast
import re

REARRANGE = "einops.rearrange"
REPEAT = "einops.repeat"
_TOKEN = re.compile(r"\([^()]*\)|\.\.\.|[A-Za-z_][A-Za-z_0-9]*|\d+|\S")
_AXES = re.compile(r"\((\s*([A-Za-z_][A-Za-z_0-9]*|\d+|\.\.\.)\s*)*\)|\.\.\.|[A-Za-z_][A-Za-z_0-9]*|\d+")


def _tokens(side: str) -> list[str] | None:
    found = [" ".join(token.split()) for token in _TOKEN.findall(side)]  # (a group's spacing made one)
    if "".join("".join(found).split()) != "".join(side.split()) or not all(map(_AXES.fullmatch, found)):
        return None
    return found


def _names(tokens: list[str]) -> list[str]:
    return [name for token in tokens for name in re.findall(r"[A-Za-z_][A-Za-z_0-9]*", token)]


def _sides(pattern: str) -> tuple[list[str], list[str]] | None:
    left, arrow, right = pattern.partition("->")
    if not arrow or "->" in right:
        return None
    sides = _tokens(left), _tokens(right)
    return None if sides[0] is None or sides[1] is None else sides


def device_split(pattern: str, device: str) -> tuple[str, bool] | None:
    """For a rearrange pattern ``(device rows) rest -> device rows rest'``: the pattern of the
    same rearrangement of whole rows (``rows rest -> rows rest'``), and whether that is no
    rearrangement at all (``rest`` and ``rest'`` the same). None for any other pattern."""
    sides = _sides(pattern)
    if sides is None:
        return None
    left, right = sides
    if not (left and left[0].startswith("(") and len(right) >= 2 and right[0] == device):
        return None
    group = _names([left[0]])
    if len(group) != 2 or group[0] != device or right[1] != group[1]:
        return None
    rows = group[1]
    rest_left, rest_right = left[1:], right[2:]
    if any(name in (device, rows) for name in _names(rest_left) + _names(rest_right)):
        return None
    return " ".join([rows, *rest_left, "->", rows, *rest_right]), rest_left == rest_right


def device_copies(pattern: str, device: str) -> bool:
    """A repeat pattern ``rest -> device rest``: one copy of the whole value per device."""
    sides = _sides(pattern)
    if sides is None:
        return False
    left, right = sides
    return bool(right) and right[0] == device and right[1:] == left and device not in _names(left)


def literal_pattern(node: ast.Call) -> str | None:
    """The pattern of ``rearrange(x, "<pattern>", ...)`` / ``repeat(...)``, written as a literal."""
    if len(node.args) != 2 or any(isinstance(a, ast.Starred) for a in node.args):
        return None
    pattern = node.args[1]
    return pattern.value if isinstance(pattern, ast.Constant) and isinstance(pattern.value, str) else None


def quoted_like(text: str, literal: str) -> str:
    """``text`` as a string literal, quoted as ``literal`` (a literal's source) is."""
    quote = "'" if literal.lstrip("rRuU").startswith("'") else '"'
    return f"{quote}{text}{quote}"
