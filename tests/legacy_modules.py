"""Generated modules that use the legacy multi-device APIs in awkward shapes, and the properties a
fix run must keep on them (issue 19). Shared by tests/test_fix_properties.py (a bounded,
derandomized run in the suite) and benchmarks/fix_fuzz.py (a longer run).

A module is a header of imports (plain, aliased, inside ``try:`` with a fallback, under
``TYPE_CHECKING``, on a ``;`` line, or a star import of a module of the program that imports the
name: ``from _star_jax import *``, written beside the generated file) and a body of snippets (calls, decorators, ``partial``, nested
pmaps, f-strings, ``;`` lines, shadowing), with a sentinel line between every two snippets that no
fix may touch; then encoded with or without a BOM, with LF or CRLF line endings.
"""

from __future__ import annotations

import ast
import atexit
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from hypothesis import strategies as st

from jaxmigrate import program_modules
from jaxmigrate.engine import Job, Mode, process_raw
from jaxmigrate.lint import registry
from jaxmigrate.migrate.to_global_jit import plan_global

TARGET = (0, 10)
CODES = tuple(rule.code for rule in registry.all_rules())

# The program's modules a generated module may star-import (written beside it, ``program``): each
# imports one name the snippets use, which the star import binds.
STAR_MODULES = {"_star_jax": "import jax\n", "_star_pmap": "from jax import pmap\n",
                "_star_tree_map": "from jax import tree_map\n"}

# The names the snippets use, bound by one of each group's headers.
HEADERS = {
    "jax": ["import jax", "import jax as jax", "import os; import jax", "import jax  # the library",
            "from _star_jax import *"],
    "pmap": ["from jax import pmap", "from jax import pmap as pmap", "try:\n    from jax import pmap\nexcept ImportError:\n    pmap = None",
             "import os; from jax import pmap", "from _star_pmap import *"],
    "tree_map": ["from jax import tree_map", "try:\n    from jax import tree_map\nexcept ImportError:\n    pass",
                 "from jax.tree_util import tree_map", "import os; from jax import tree_map", "from _star_tree_map import *"],
    "Mesh": ["from jax.sharding import Mesh", "from jax.experimental.maps import Mesh",
             "try:\n    from jax.sharding import Mesh\nexcept ImportError:\n    from jax.experimental.maps import Mesh"],
    "jax_utils": ["from flax import jax_utils"],
    "lax": ["from jax import lax"],
    "partial": ["from functools import partial", "import functools\npartial = functools.partial"],
    "typing": ["from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from jax.experimental.pjit import pjit"],
}

# Each snippet: (the names it needs, its text with {n} for a number unique to the module).
SNIPPETS = [
    (("jax",), "f{n} = jax.pmap(lambda x: x * 2)"),
    (("jax",), "@jax.pmap\ndef step{n}(x):\n    return x + 1"),
    (("jax", "partial"), "@partial(jax.pmap, axis_name='batch')\ndef step{n}(x):\n    return x"),
    (("jax",), "g{n} = jax.pmap(jax.pmap(lambda x: x))"),
    (("pmap",), "h{n} = pmap(abs)"),
    (("pmap",), 'print(f"{{pmap(abs)}}")'),
    (("pmap",), "a{n} = 1; b{n} = pmap(abs)"),
    (("pmap",), "def shadow{n}(pmap):\n    return pmap(1)"),
    (("tree_map",), "t{n} = tree_map(len, {{}})"),
    (("jax",), "u{n} = jax.tree_map(len, [])"),
    (("jax", "tree_map"), "def mapped{n}(x):\n    return tree_map(abs, x)"),
    (("jax", "Mesh"), "mesh{n} = Mesh(jax.devices(), ('x',))\nwith mesh{n}:\n    pass"),
    (("jax", "jax_utils"), "params{n} = jax_utils.replicate({{'w': 1.0}})"),
    (("jax", "jax_utils"), "first{n} = jax_utils.unreplicate(params)"),
    (("jax", "lax"), "def reduce{n}(x):\n    return lax.psum(x, axis_name='devices')"),
    (("jax",), "keys{n} = jax.random.split(jax.random.PRNGKey(0), num=jax.local_device_count())"),
    (("jax",), "y{n} = jax.tree.map(lambda x: x[0], jax.pmap(abs)(1))"),
    (("jax",), "x{n} = jax.device_put_replicated(1, jax.local_devices())"),
    # Rewrites that write string literals and long lines, inside f-strings (issue 19).
    (("jax",), 'print(f"{{jax.device_put_replicated(1, jax.local_devices())}}")'),
    (("jax",), "print(f'{{jax.device_put_replicated(1, jax.local_devices())}}')"),
    (("jax", "Mesh"), 'print(f"{{Mesh(jax.devices(), (\'x\',))}} {{jax.tree_map(abs, [])}}")'),
    (("jax",), 'from jax.sharding import PositionalSharding\nprint(f"{{jax.device_put(1, PositionalSharding(jax.devices()))}}")'),
    (("jax",), "if True:\n    import jax.experimental.pjit\n    p{n} = jax.experimental.pjit.pjit(abs)"),
    (("typing",), "def typed{n}(f: 'pjit') -> None:\n    return None"),
    # pmap or jit as a flag says, the pmap mode's branches alone rewritten by the global view
    (("jax",), "def run{n}(x, use_pmap=True):\n    if use_pmap:\n        step = jax.pmap(lambda v: v * 2)\n"
               "        x = x.reshape((jax.local_device_count(), -1) + x.shape[1:])\n    else:\n"
               "        step = jax.jit(lambda v: v * 2)\n    y = step(x)\n    if use_pmap:\n"
               "        y = y.reshape((-1,) + y.shape[2:])\n    return y"),
    # a batch function that splits only where its caller's flag asks (`get_batch(..., for_pmap=True)`)
    (("jax",), "def batches{n}(x, for_pmap=False):\n    if for_pmap:\n"
               "        x = x.reshape((jax.local_device_count(), -1) + x.shape[1:])\n    return x\n\n\n"
               "def train{n}(x):\n    step = jax.pmap(lambda v: jax.lax.pmean(v.mean(), 'i'), axis_name='i')\n"
               "    plain = batches{n}(x)\n    print(step(batches{n}(x, for_pmap=True))[0], plain)"),
]

SENTINEL = "keep_{n} = {n}  # sentinel"
# Findings about pmap's conventions, made only in a module that has a pmap (per-device keys,
# device 0's copy of a pmap's output): the global view takes the pmaps, and them with them.
PMAP_CONVENTIONS = frozenset({"JM503", "JM505"})


@dataclass
class Module:
    text: str
    bom: bool
    crlf: bool

    @property
    def raw(self) -> bytes:
        text = self.text.replace("\n", "\r\n") if self.crlf else self.text
        return (b"\xef\xbb\xbf" if self.bom else b"") + text.encode()


@st.composite
def modules(draw) -> Module:
    """A module of 1-5 snippets, the headers they need, sentinels between every two."""
    chosen = draw(st.lists(st.sampled_from(range(len(SNIPPETS))), min_size=1, max_size=5))
    needed = sorted({name for index in chosen for name in SNIPPETS[index][0]})
    header = [draw(st.sampled_from(HEADERS[name])) for name in needed]
    parts = [SENTINEL.format(n=0), *header]
    for number, index in enumerate(chosen, 1):
        parts += [SENTINEL.format(n=number * 10), SNIPPETS[index][1].format(n=number)]
    parts.append(SENTINEL.format(n=999))
    return Module("\n".join(parts) + "\n", draw(st.booleans()), draw(st.booleans()))


@cache
def program() -> Path:
    """The generated module's path, in a folder holding the modules it may star-import."""
    folder = Path(tempfile.mkdtemp(prefix="jaxmigrate-fuzz-"))
    atexit.register(shutil.rmtree, folder, True)
    for name, text in STAR_MODULES.items():
        (folder / f"{name}.py").write_text(text)
    return folder / "generated.py"


def run(raw: bytes, unsafe: bool, mode: Mode = Mode.FIX):
    return process_raw(raw, str(program()), CODES, Job(mode, unsafe, TARGET))


def pyflakes_names(text: str) -> tuple[Counter, Counter]:
    """(undefined names, names imported but unused) as pyflakes reports them, counted."""
    import io

    from pyflakes.api import check
    from pyflakes.reporter import Reporter

    out = io.StringIO()
    check(text, "generated.py", Reporter(out, io.StringIO()))
    report = out.getvalue()
    return (Counter(re.findall(r"undefined name '([^']+)'", report)),
            Counter(re.findall(r"'([^']+)' imported but unused", report)))


def decoded(raw: bytes) -> str:
    return raw.decode("utf-8-sig").replace("\r\n", "\n")


def violations(module: Module, unsafe: bool) -> list[str]:
    """Every property the fix run breaks on ``module`` (empty: none)."""
    with program_modules.reading(program()):  # (what its star imports bind is read from there)
        return _violations(module, unsafe)


def _violations(module: Module, unsafe: bool) -> list[str]:
    problems = []
    before = run(module.raw, unsafe, Mode.CHECK)
    fixed = run(module.raw, unsafe)
    out = fixed.new_bytes if fixed.changed else module.raw
    text = decoded(out)
    jm001 = [f.message for f in fixed.findings if f.code == "JM001"]
    if jm001:
        problems.append(f"JM001: {jm001[0]}")
    try:
        ast.parse(text)
    except SyntaxError as error:
        problems.append(f"the output does not parse: {error}")
        return problems
    if module.bom != out.startswith(b"\xef\xbb\xbf") or module.crlf != (b"\r\n" in out):
        problems.append("the BOM or the line endings were not kept")
    again = run(out, unsafe)
    if again.changed or again.fixed:
        problems.append("a second fix changed the file")
    sentinels = [line for line in module.text.splitlines() if line.endswith("# sentinel")]
    if [line for line in text.splitlines() if line.endswith("# sentinel")] != sentinels:
        problems.append("a line away from every site changed")
    (undefined_before, unused_before), (undefined_after, unused_after) = (
        pyflakes_names(decoded(module.raw)), pyflakes_names(text))
    if undefined_after - undefined_before:
        problems.append(f"new undefined names: {sorted(undefined_after - undefined_before)}")
    # An import a rewrite made unused goes with it (a `;` line, a try body: issue 19).
    legacy_unused = [name for name in unused_after - unused_before if name.startswith(("jax.", "flax."))]
    if legacy_unused:
        problems.append(f"legacy imports left unused: {sorted(legacy_unused)}")
    # A finding with no fix to apply is still reported after, unless its line was rewritten (a
    # later pass may fix it once another fix made it fixable): keyed by code and line text.
    allowed = {"safe", "unsafe"} if unsafe else {"safe"}
    lines_before, lines_after = decoded(module.raw).splitlines(), text.splitlines()
    kept = Counter((f.code, lines_before[f.line - 1].strip()) for f in before.findings
                   if f.fix is None or not _applicable(f.fix, allowed))
    after = Counter((f.code, lines_after[f.line - 1].strip()) for f in fixed.findings if f.line <= len(lines_after))
    remaining = Counter(line.strip() for line in lines_after)
    lost = [key for key, count in (kept - after).items() if remaining[key[1]] >= count]
    moved = unsafe and any(f.fix is not None and f.fix.whole_module for f in before.findings) \
        and plan_global(decoded(module.raw)).possible
    if moved:  # (the module's pmaps gone, what only a module with pmap is warned of goes with them)
        lost = [key for key in lost if key[0] not in PMAP_CONVENTIONS]
    if lost:
        problems.append(f"findings lost, their line unchanged: {sorted(lost)}")
    # A finding check offers no fix for is not fixed behind its back: its line is still in the
    # output unless a finding spanning that line offered the fix that rewrote it (issue 19: `with
    # mesh1:` reported without a fix, then rewritten by --fix once JM303 had moved `Mesh`). Each
    # generated site is a statement of its own; in real code a fix may also rewrite the lines of
    # the findings that depend on it (JM505's `x[0]` goes with its pmap).
    offered = {line for f in before.findings if f.fix is not None and _applicable(f.fix, allowed)
               for line in range(f.line, (f.end_line or f.line) + 1)}
    # JM101's global view moves the module whole, the driving code with its steps (its fix says
    # so): the lines its plan rewrites (a device-count reshape JM504 reports) are that fix's.
    if moved:
        offered |= _lines_the_global_view_rewrites(decoded(module.raw))
    unoffered = Counter(lines_before[f.line - 1].strip() for f in before.findings
                        if f.line not in offered and (f.fix is None or not _applicable(f.fix, allowed)))
    rewritten = [line for line, count in unoffered.items() if remaining[line] < count
                 and Counter(l.strip() for l in lines_before)[line] == count]
    if rewritten:
        problems.append(f"lines rewritten that check offered no fix for: {sorted(rewritten)}")
    return problems


def _lines_the_global_view_rewrites(text: str) -> set[int]:
    view = plan_global(text)
    lines = set()
    for edit in view.plan.edits:
        first = text.count("\n", 0, edit.start) + 1
        lines.update(range(first, text.count("\n", 0, max(edit.end - 1, edit.start)) + 2))
    return lines


def _applicable(fix, allowed: set[str]) -> bool:
    while fix is not None:
        if fix.safety.value in allowed:
            return True
        fix = fix.fallback
    return False
