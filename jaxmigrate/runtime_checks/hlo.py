"""Collectives in optimized HLO text: which kind, how many, how many bytes, over which groups.

Reads the ``*after_optimizations.txt`` files XLA writes with ``--xla_dump_hlo_as_text``. The
text format drifts between XLA versions (jax 0.4.30 prints ``all-reduce.6 = f32[] ...``, 0.10.2
prints ``%psum.7 = f32[] ...`` and may write replica groups as ``mesh[...] {...}``), so this
parser keys only on the stable parts: ``name = shape opcode(operands), attributes``.

Counts are static: an all-reduce inside a while body counts once, however often it runs.
Bytes are per device, per op: the larger of what goes in (operands) and what comes out (result),
so an all-gather counts its gathered result and a reduce-scatter its unscattered input.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all")

# Bits per element of each HLO primitive type; sub-byte types are packed.
_ELEMENT_BITS = {
    "pred": 8, "token": 0,
    "s2": 2, "u2": 2, "s4": 4, "u4": 4, "s8": 8, "u8": 8,
    "s16": 16, "u16": 16, "s32": 32, "u32": 32, "s64": 64, "u64": 64,
    "f16": 16, "bf16": 16, "f32": 32, "f64": 64, "c64": 64, "c128": 128,
}
_FP8_BITS = 8  # f8e4m3fn, f8e5m2, f8e4m3b11fnuz, ... all one byte
_FP4_BITS = 4  # f4e2m1fn

_ASSIGN = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*")
_ARRAY_SHAPE = re.compile(r"(?P<type>[a-z][a-z0-9]*)\[(?P<dims>[^\]]*)\]")
_OPCODE = re.compile(r"\s*(?P<op>[a-z][a-z0-9\-]*)\(")
_COMPUTATION = re.compile(r"^\s*(?:ENTRY\s+)?%?(?P<name>[\w.\-]+)\s*(?:\(.*\)\s*->\s*.*)?\{\s*$")
_GROUP_ATTRS = ("replica_groups=", "source_target_pairs=")


@dataclass(frozen=True)
class Collective:
    """One collective instruction of an optimized HLO module."""

    kind: str  # one of KINDS; an async ``-start`` op is counted under its base kind
    name: str
    bytes: int
    operand_bytes: int
    result_bytes: int
    groups: str = ""  # replica_groups (or source_target_pairs) as XLA printed them
    is_async: bool = False
    computation: str = ""


@dataclass
class KindTotal:
    count: int = 0
    bytes: int = 0


@dataclass
class CollectiveSummary:
    """Totals per kind over one or more modules, plus the instructions themselves."""

    totals: dict[str, KindTotal] = field(default_factory=dict)
    ops: list[Collective] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)

    def add(self, module: str, collectives: Iterable[Collective]) -> None:
        self.modules.append(module)
        for op in collectives:
            total = self.totals.setdefault(op.kind, KindTotal())
            total.count += 1
            total.bytes += op.bytes
            self.ops.append(op)

    def count(self, kind: str) -> int:
        return self.totals.get(kind, KindTotal()).count

    def bytes_of(self, kind: str) -> int:
        return self.totals.get(kind, KindTotal()).bytes

    def to_json(self) -> dict[str, object]:
        return {
            "modules": list(self.modules),
            "totals": {k: {"count": t.count, "bytes": t.bytes} for k, t in sorted(self.totals.items())},
            "ops": [
                {"kind": o.kind, "name": o.name, "bytes": o.bytes, "groups": o.groups,
                 "async": o.is_async, "computation": o.computation}
                for o in self.ops
            ],
        }


def element_bits(element_type: str) -> int:
    if element_type in _ELEMENT_BITS:
        return _ELEMENT_BITS[element_type]
    if element_type.startswith("f8"):
        return _FP8_BITS
    if element_type.startswith("f4"):
        return _FP4_BITS
    raise ValueError(f"unknown HLO element type {element_type!r}")


def shape_leaves(shape_text: str) -> list[tuple[str, tuple[int, ...]]]:
    """Array leaves of an HLO shape (tuples flattened): [(element type, dims)]."""
    leaves = []
    for match in _ARRAY_SHAPE.finditer(shape_text):
        dims_text = match["dims"].replace("<=", "")  # dynamic dims print as <=N: use the bound
        dims = tuple(int(d) for d in dims_text.split(",") if d.strip())
        leaves.append((match["type"], dims))
    return leaves


def shape_bytes(shape_text: str) -> int:
    bits = sum(element_bits(t) * math.prod(dims) for t, dims in shape_leaves(shape_text))
    return (bits + 7) // 8


def _balanced_end(text: str, start: int) -> int:
    """Index just past the bracket group opening at text[start]."""
    closing = {"(": ")", "[": "]", "{": "}"}
    stack = []
    for i in range(start, len(text)):
        ch = text[i]
        if ch in closing:
            stack.append(closing[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return i + 1
    return len(text)


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current))
    return parts


def _attribute(attrs: str, key: str) -> str:
    """The raw value of ``key=`` among top-level attributes (brackets kept balanced)."""
    for part in _split_top_level(attrs):
        part = part.strip()
        if part.startswith(key):
            return part[len(key):].strip()
    return ""


@dataclass(frozen=True)
class _Instruction:
    name: str
    shape: str
    opcode: str
    operands: list[str]
    attrs: str


def _parse_instruction(line: str) -> _Instruction | None:
    assign = _ASSIGN.match(line)
    if not assign:
        return None
    pos = assign.end()
    if pos < len(line) and line[pos] == "(":
        shape_end = _balanced_end(line, pos)
    else:
        space = line.find(" ", pos)
        shape_end = len(line) if space < 0 else space
    shape = line[pos:shape_end]
    opcode = _OPCODE.match(line, shape_end)
    if not opcode:
        return None
    open_paren = opcode.end() - 1
    close = _balanced_end(line, open_paren)
    operands = [o.strip() for o in _split_top_level(line[open_paren + 1 : close - 1])]
    return _Instruction(assign["name"], shape, opcode["op"], operands, line[close:].lstrip(", "))


def _operand_bytes(operand: str, shapes: dict[str, str]) -> int:
    operand = re.sub(r"/\*.*?\*/", "", operand).strip()
    if _ARRAY_SHAPE.match(operand):  # older printers inline the shape: "f32[2]{0} %x"
        return shape_bytes(operand.rsplit(" ", 1)[0])
    return shape_bytes(shapes.get(operand.lstrip("%"), ""))


def _collective(inst: _Instruction, shapes: dict[str, str], computation: str) -> Collective | None:
    opcode = inst.opcode
    is_async = opcode.endswith("-start")
    kind = opcode[: -len("-start")] if is_async else opcode
    if kind not in KINDS:
        return None
    operand_bytes = sum(_operand_bytes(o, shapes) for o in inst.operands)
    if is_async:
        # A -start op's result tuple holds the operands too (and, for collective-permute,
        # u32[] context scalars); what the collective produces is the rest.
        leaves = shape_leaves(inst.shape)
        if kind == "collective-permute":
            leaves = [(t, d) for t, d in leaves if not (t == "u32" and d == ())]
        total = (sum(element_bits(t) * math.prod(d) for t, d in leaves) + 7) // 8
        result_bytes = max(total - operand_bytes, 0) if len(leaves) > 1 else total
    else:
        result_bytes = shape_bytes(inst.shape)
    groups = next((v for key in _GROUP_ATTRS if (v := _attribute(inst.attrs, key))), "")
    return Collective(
        kind=kind, name=inst.name, bytes=max(operand_bytes, result_bytes),
        operand_bytes=operand_bytes, result_bytes=result_bytes, groups=groups,
        is_async=is_async, computation=computation,
    )


def parse_collectives(hlo_text: str) -> list[Collective]:
    """Every collective instruction in one HLO module's text, in textual order."""
    instructions: list[tuple[str, _Instruction]] = []
    shapes: dict[str, str] = {}
    computation = ""
    for line in hlo_text.splitlines():
        header = _COMPUTATION.match(line)
        if header and "=" not in line.split("{", 1)[0]:
            computation = header["name"]
            continue
        inst = _parse_instruction(line)
        if inst is None:
            continue
        shapes[inst.name] = inst.shape
        instructions.append((computation, inst))
    found = []
    for comp, inst in instructions:
        op = _collective(inst, shapes, comp)
        if op is not None:
            found.append(op)
    return found


def summarize_modules(modules: Iterable[tuple[str, str]]) -> CollectiveSummary:
    """Totals over (module name, HLO text) pairs."""
    summary = CollectiveSummary()
    for name, text in modules:
        summary.add(name, parse_collectives(text))
    return summary


def parse_groups(groups: str) -> list[list[int]] | None:
    """Explicit ``{{0,1},{2,3}}`` and iota ``[2,4]<=[4,2]T(1,0)`` forms as lists; else None."""
    groups = groups.strip()
    if groups.startswith("{"):
        return [[int(x) for x in g.split(",") if x.strip()] for g in re.findall(r"\{([\d,\s]*)\}", groups)]
    iota = re.fullmatch(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", groups)
    if not iota:
        return None
    out_dims = [int(d) for d in iota[1].split(",")]
    src_dims = [int(d) for d in iota[2].split(",")]
    perm = [int(p) for p in iota[3].split(",")] if iota[3] else list(range(len(src_dims)))
    ids = _transposed_iota(src_dims, perm)
    width = math.prod(out_dims[1:]) if len(out_dims) > 1 else len(ids)
    return [ids[i : i + width] for i in range(0, len(ids), width)]


def _transposed_iota(dims: list[int], perm: list[int]) -> list[int]:
    """Row-major contents of iota(dims) transposed by perm, without numpy."""
    strides = [math.prod(dims[i + 1 :]) for i in range(len(dims))]
    new_dims = [dims[p] for p in perm]
    out = []
    for flat in range(math.prod(new_dims)):
        index, rest = [], flat
        for size in reversed(new_dims):
            index.append(rest % size)
            rest //= size
        index.reverse()
        out.append(sum(index[k] * strides[perm[k]] for k in range(len(perm))))
    return out
