"""The algebra of ``PositionalSharding`` chains: the id grid a chain makes (``State``), and the one
mesh several grids of the same devices can share (``Axes``, ``mesh_axes``). See
``_sharding_positional`` for the model it implements."""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field

from jaxmigrate.migrate._plan import Unprovable

AXIS_NAMES = ("x", "y", "z", "w", "v", "u")


@dataclass(frozen=True)
class State:
    shape: tuple[int | None, ...]  # the id grid's shape (None: unknown length of a device list)
    spec: tuple[tuple[str, ...], ...]  # per grid dim: the mesh axes splitting it, major first
    fresh: bool  # the grid is the flat device list reshaped (no replicate/transpose since)


@dataclass
class Chain:
    node: ast.expr
    base: ast.expr  # a PositionalSharding(...) call or a Name
    ops: list[ast.expr] = field(default_factory=list)  # innermost first


@dataclass(frozen=True)
class Axes:
    """The one mesh of a component: sizes (None: an unknown device count) and names."""

    sizes: tuple[int | None, ...]
    names: tuple[str, ...]

    def spec_for(self, shape: tuple[int | None, ...]) -> tuple[tuple[str, ...], ...]:
        """The mesh axes each grid dim spans, the grid being the flat device list reshaped."""
        if self.sizes == (None,):
            return tuple(() if n == 1 else self.names for n in shape)
        if None in shape:  # a device list of (statically) unknown length, as long as the mesh
            shape = tuple(math.prod(self.sizes) if n is None else n for n in shape)  # type: ignore[arg-type]
        spec, i, = [], 0
        for n in shape:
            group, size = [], 1
            while size < n:  # type: ignore[operator]
                size *= self.sizes[i]  # type: ignore[operator]
                group.append(self.names[i])
                i += 1
            if size != n:
                raise Unprovable("a grid shape does not line up with the others' mesh axes")
            spec.append(tuple(group))
        return tuple(spec)

    def fresh(self, shape: tuple[int | None, ...]) -> State:
        return State(shape, self.spec_for(shape), True)


def mesh_axes(shapes: list[tuple[int | None, ...]]) -> Axes:
    """The coarsest mesh whose axes every grid shape groups in order: split at every cumulative
    product of every shape (reshape(4, 2) and reshape(2, 4) of 8 devices: a 2x2x2 mesh)."""
    totals = {math.prod(s) for s in shapes if None not in s}  # type: ignore[arg-type]
    if len(totals) > 1:
        raise Unprovable("the grids have different device counts")
    if not totals:
        return Axes((None,), ("x",))
    total = totals.pop()
    cuts = {total}
    for shape in shapes:
        if None in shape:
            continue
        acc = 1
        for n in shape:
            acc *= n  # type: ignore[operator]
            cuts.add(acc)
    cuts.discard(1)
    sizes, prev = [], 1
    for cut in sorted(cuts):
        if cut % prev:
            raise Unprovable("the grid shapes cannot share one mesh (their splits do not nest)")
        sizes.append(cut // prev)
        prev = cut
    names = AXIS_NAMES[: len(sizes)] if len(sizes) <= len(AXIS_NAMES) else tuple(f"a{i}" for i in range(len(sizes)))
    return Axes(tuple(sizes) or (1,), tuple(names) or ("x",))
