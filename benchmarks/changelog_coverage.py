"""Which of the removals JAX's changelog lists (0.4.0 - 0.10.2) the catalogue covers, and why not.

    python benchmarks/changelog_coverage.py [--changelog PATH] [--list]

Reads JAX's CHANGELOG.md (default: ``../shared/reference/jax-CHANGELOG.md`` beside the
repository), keeps the sections of jax and jaxlib 0.4.0 to 0.10.2, and takes every bullet that
says something was removed, deleted or is no longer accepted (sub-bullets of a "the following were
removed" bullet inherit it; "will be removed" alone does not count). From each such bullet it reads
the API names written in backticks, qualified with the module the bullet names ("From
`jax.core`: `Jaxpr`, ...") and the keywords it names, and sorts each into:

* **covered**: a catalogue entry reports it (its name, a member of a legacy module or object, an
  import-only module path, or the keyword of a callee the bullet names);
* **present**: the installed JAX (0.10.2) still has the name: it is the bullet's replacement
  (`use jax.tree.map`), or only a behaviour of it changed;
* **not an API**: a word in backticks that names no JAX API (`None`, `AttributeError`,
  `math.prod`, a package extra);
* **left out**, with the reason (``LEFT_OUT`` below): methods of JAX objects, configuration
  flags, jaxlib-internal modules, accidental re-exports of the standard library, ...;
* **unclassified**: none of these (the test suite keeps this list empty).

``--list`` prints every name with its outcome; the summary is printed always.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jaxmigrate import catalogue  # noqa: E402

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "reference" / "jax-CHANGELOG.md"
FIRST, LAST = (0, 4, 0), (0, 10, 2)

_HEADER = re.compile(r"^## (jax|jaxlib|JAX) (\d+)\.(\d+)\.(\d+)\b", re.IGNORECASE)
_BULLET = re.compile(r"^(\s*)[*-] (.*)$")
_REMOVAL = re.compile(r"\b(removed|deleted|no longer (?:available|accepts?|supported|supports)|"
                      r"have been removed|has been removed|was removed|were removed)\b", re.IGNORECASE)
_FUTURE = re.compile(r"\b(?:will|to|should|would|can|may) (?:soon |now )?be removed\b", re.IGNORECASE)
_FROM_MODULE = re.compile(r"\b(?:[Ff]rom|[Ii]n) (?:the )?(?:\{mod\}\s*)?`(jax[\w.]*)`")
_SPAN = re.compile(r"`([^`\n]+)`")
_NAME = re.compile(r"[A-Za-z_][\w.]*")
# A span right after one of these is the replacement the bullet recommends, not what was removed.
_REPLACEMENT_CUE = re.compile(
    r"(?:\b[Uu]se(?: the)?(?: built-in)?|instead of|\binstead|in favor of|replaced (?:by|with)|becomes|\bprefer|\bsee|\bSee|"
    r"available (?:at|from)|moved to|renamed (?:to|as)|\bcall|\bCall|\bpass|\bPass|\bwith|equivalent to|"
    r"such as|e\.g\.|via|\bto)\W*(?:\{\w+\}\s*)?$")

# Why a removed name the catalogue does not list is left out: first matching pattern wins.
LEFT_OUT: list[tuple[str, str]] = [
    (r"^jax\.Array\.|\.device_buffers?$|^PRNGKeyArray\.|\.unsafe_raw_array$|^jax\.export\.Exported\.|"
     r"^jax\.stages\.Compiled\.|^jax\.export\.DisabledSafetyCheck\.|^jax\.experimental\.Exported\.|"
     r"\.vma$|^XlaExecutable\.|\.cost_analysis$|^jax\.numpy\.ndarray\.|\.block_host_until_ready$|"
     r"^Device\.|transfer_(?:to_infeed|from_outfeed)$|^device$|^jax_array\.",
     "a method or attribute of a JAX object: which object a receiver is needs types the resolver does not infer"),
    (r"^(?:jax_|JAX_|--jax|config\.jax_|jax\.config\.jax_)|_FLAGS$|^xla_|^experimental_cpp",
     "a configuration option or environment variable, not a name code imports"),
    (r"^jaxlib\b|^jax\.lib\.xla_extension\.|^jax\.lib\.xla_client\.|^jax\.lib\.xla_bridge\.",
     "inside jaxlib or jax.lib, whose modules the catalogue reports whole (jax.lib.xla_bridge, xla_client, xla_extension)"),
    (r"^jax\.core\.(?:collections|dtypes|lu|map|namedtuple|partial|pp|ref|safe_zip|safe_map|source_info_util|"
     r"total_ordering|traceback_util|tuple_delete|tuple_insert|zip|as_hashable_function)$|"
     r"^jax\.lax\.(?:dtypes|itertools)$|^jax\.interpreters\.ad\.(?:config|source_info_util)$",
     "an accidental re-export of a standard-library or internal module (itertools, functools.partial, ...): "
     "listing these common words would make every file a candidate for a check"),
    (r"^jax\.core\.pp_", "internal pretty-printers (jax.core.pp_*): no user code in the corpus, and a prefix the catalogue cannot list"),
    (r"^jax\.experimental\.jax2tf|^jax2tf\.|^jax\.experimental\.pallas|^pallas|^(?:enable_xla|native_serialization)$",
     "jax2tf and Pallas options (native_serialization=False, enable_xla, BlockSpec order): behaviours of "
     "experimental converters, not removed names"),
    (r"^jax\.extend\.mlir\.mhlo$|^jax\.extend\.core\.primitives\.pjit_p$|^jax\.extend\.backend\.add_clear_backends_callback$|"
     r"^jax\.experimental\.pjit\.pjit_p$|^for_loop$|^jax\.interpreters\.mlir\.(?:hlo|func_dialect)$|^mhlo$|"
     r"^core\.token$|^jax\.core\.token$|^xla_pmap_p$|^jax\.interpreters\.pxla\.",
     "a primitive or lowering internal (mhlo, pjit_p, for_loop, pxla internals): no mechanical user-facing replacement; "
     "the pxla pmap runtime internals are allowed in tests/test_catalogue.py with their reason"),
    (r"^jax\.ad$", "the name came back in JAX 0.10 as a new namespace (jax.ad.GradRef, ...): a mention cannot "
     "tell the module removed in 0.4.14 from it"),
    (r"^(?:in_parts|out_parts|instantiate_const_outputs)$",
     "keywords of jax.xla_computation, which the catalogue reports whole"),
    (r"^(?:vmap_method|method|stable|platforms|scope|constraints|shardings|in_shardings|out_shardings|min|max|"
     r"shape|a|b|x|y|tiled|copy|order|ndmin|precision|preferred_element_type|implementation|use_magma|"
     r"sharding|named_shape|global_arg_shapes|rtol|out_sharding)$",
     "a keyword the bullet names as the replacement or as still accepted"),
    (r"^(?:PmapFunction|pmap|NoSharding|Chunked|Unstacked|ShardedAxis|Replicated|ShardingSpec|"
     r"MapTracer|PmapExecutable|parallel_callable|shard_args|spec_to_indices)$",
     "jaxlib.xla_extension / jax.interpreters.pxla pmap internals (allowed in tests/test_catalogue.py)"),
]


@dataclass
class Item:
    version: str
    text: str
    names: list[str] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)
    prose: list[str] = field(default_factory=list)


def sections(text: str):
    """(version, lines) of each jax/jaxlib section from FIRST to LAST."""
    current, lines = None, []
    for line in text.splitlines():
        if match := _HEADER.match(line):
            if current:
                yield current, lines
            version = tuple(int(g) for g in match.groups()[1:])
            current = ".".join(map(str, version)) if FIRST <= version <= LAST else None
            lines = []
        elif current:
            lines.append(line)
    if current:
        yield current, lines


def bullets(lines: list[str]):
    """(depth, text) of each bullet with its continuation lines joined."""
    out: list[list] = []
    for line in lines:
        if match := _BULLET.match(line):
            out.append([len(match.group(1)), match.group(2)])
        elif out and line.strip() and not line.startswith("#"):
            out[-1][1] += " " + line.strip()
    return [(depth, text) for depth, text in out]


def removal_items(changelog: str) -> list[Item]:
    items = []
    for version, lines in sections(changelog):
        parents: list[tuple[int, bool, str | None]] = []  # (depth, removal, module context)
        for depth, text in bullets(lines):
            while parents and parents[-1][0] >= depth:
                parents.pop()
            inherited = any(p[1] for p in parents)
            text = text.replace("``", "`")  # RST literals: one span, not two
            removal = bool(_REMOVAL.search(_FUTURE.sub("", text)))
            context = next((m.group(1) for m in [_FROM_MODULE.search(text)] if m), None)
            context = context or next((p[2] for p in reversed(parents) if p[2]), None)
            parents.append((depth, removal, context))
            if removal or inherited:
                items.append(_read(version, text, context))
    return items


def _read(version: str, text: str, context: str | None) -> Item:
    item = Item(version, text)
    for match in _SPAN.finditer(text):
        span = match.group(1).strip()
        if _REPLACEMENT_CUE.search(text[max(0, match.start() - 40):match.start()]):
            continue
        name = re.sub(r"\(.*$", "", span).strip().rstrip(".")
        name = re.sub(r"^(?:jnp|numpy)\.", "jax.numpy.", re.sub(r"^(lax|core)\.", r"jax.\1.", name))
        if not _NAME.fullmatch(name) or name == context:
            continue
        if name.startswith(("jax.", "jaxlib.", "jax2tf.")):
            item.names.append(name)
        elif "." in name:
            item.prose.append(name)  # math.prod, np.asarray: not JAX's
        elif _names_a_parameter(text, match):
            item.keywords.append(name)
        elif context:
            item.names.append(f"{context}.{name}")
        else:
            item.prose.append(name)  # `None`, `AttributeError`, `f`: words, not removed APIs
    return item


_PARAMETER = r"(?:argument|arguments|kwarg|kwargs|parameter|parameters|keyword|keywords)"


def _names_a_parameter(text: str, match: re.Match) -> bool:
    """`x` in "the `x` argument", "`x` and `y` parameters", "the parameters `x` and `y`"."""
    after, before = text[match.end():match.end() + 80], text[max(0, match.start() - 80):match.start()]
    joiner = r"\s*(?:,\s*and|,\s*or|,|and|or)\s*"
    return bool(re.match(r"(?:" + joiner + r"`[^`]+`)*\s*" + _PARAMETER + r"\b", after)
                or re.search(_PARAMETER + r"\s*(?:`[^`]+`" + joiner + r")*$", before))


def present_in_jax(name: str) -> bool:
    missing = object()
    return name.split(".")[0] == "jax" and catalogue.installed(name, missing) is not missing


def covering(name: str) -> catalogue.Symbol | None:
    return catalogue.lookup(name) or catalogue.import_only(name)


def covering_keyword(keyword: str, text: str) -> catalogue.Symbol | None:
    for symbol in catalogue.symbols():
        if symbol.kind == "keyword" and symbol.keyword == keyword:
            if any(name.rpartition(".")[2] in text for name in symbol.names):
                return symbol
    return None


def left_out(name: str) -> str | None:
    for pattern, reason in LEFT_OUT:
        if re.search(pattern, name):
            return reason
    return None


@dataclass
class Outcome:
    version: str
    name: str
    kind: str  # covered | present | left out | unclassified
    detail: str


def classify(changelog: str, check_installed: bool = True) -> list[Outcome]:
    outcomes, seen = [], set()
    for item in removal_items(changelog):
        for name in item.names:
            if (name, "") in seen:
                continue
            seen.add((name, ""))
            if symbol := covering(name):
                outcomes.append(Outcome(item.version, name, "covered", f"{symbol.code} {symbol.name}"))
            elif reason := left_out(name):
                outcomes.append(Outcome(item.version, name, "left out", reason))
            elif check_installed and present_in_jax(name):
                outcomes.append(Outcome(item.version, name, "present", "in jax 0.10.2"))
            else:
                outcomes.append(Outcome(item.version, name, "unclassified", item.text[:120]))
        for word in item.prose:
            if (word, "prose") not in seen:
                seen.add((word, "prose"))
                if symbol := covering_keyword(word, item.text):  # "`in_axis_resources` ... deleted from pjit"
                    outcomes.append(Outcome(item.version, f"{word}=", "covered", f"{symbol.code} {symbol.name}({word}=)"))
                    continue
                kind, detail = ("left out", reason) if (reason := left_out(word)) else ("not an API", item.text[:80])
                outcomes.append(Outcome(item.version, word, kind, detail))
        for keyword in item.keywords:
            if (keyword, item.text) in seen:
                continue
            seen.add((keyword, item.text))
            if symbol := covering_keyword(keyword, item.text):
                outcomes.append(Outcome(item.version, f"{keyword}=", "covered", f"{symbol.code} {symbol.name}({keyword}=)"))
            elif reason := left_out(keyword):
                outcomes.append(Outcome(item.version, f"{keyword}=", "left out", reason))
            else:
                outcomes.append(Outcome(item.version, f"{keyword}=", "unclassified", item.text[:120]))
    return outcomes


def summary(outcomes: list[Outcome]) -> dict[str, int]:
    names = {n for s in catalogue.symbols() for n in s.names}
    counts = {"catalogue entries": len(catalogue.symbols()), "catalogue names": len(names)}
    for kind in ("covered", "present", "left out", "not an API", "unclassified"):
        counts[f"changelog removals {kind}"] = sum(o.kind == kind for o in outcomes)
    counts["changelog removals read"] = len(outcomes)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changelog", type=Path, default=DEFAULT)
    parser.add_argument("--list", action="store_true", help="print every name with its outcome")
    args = parser.parse_args(argv)
    if not args.changelog.is_file():
        print(f"no changelog at {args.changelog}", file=sys.stderr)
        return 2
    outcomes = classify(args.changelog.read_text(encoding="utf-8"))
    if args.list:
        for o in outcomes:
            print(f"{o.version:8} {o.kind:12} {o.name:60} {o.detail}")
        print()
    reasons: dict[str, int] = {}
    for o in outcomes:
        if o.kind == "left out":
            reasons[o.detail] = reasons.get(o.detail, 0) + 1
    for key, value in summary(outcomes).items():
        print(f"{key:32} {value}")
    print("\nleft out, by reason:")
    for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"  {count:3}  {reason}")
    unclassified = [o for o in outcomes if o.kind == "unclassified"]
    for o in unclassified:
        print(f"UNCLASSIFIED {o.version} {o.name}: {o.detail}")
    return 1 if unclassified else 0


if __name__ == "__main__":
    raise SystemExit(main())
