"""Where the global view fires, and why not elsewhere: the pmap sites of a tree, grouped and counted.

    python benchmarks/global_view_survey.py [PATH ...] [--sdists] [--markdown FILE.md]

Runs ``python -m jaxmigrate check --unsafe-fixes --no-cache --output-format json`` (this checkout's
code) on each PATH (default: the public legacy corpus of ``benchmarks/corpus.py``, and the fetched
programs of ``$JAXMIGRATE_REALCODE`` where that folder exists; ``--sdists`` adds ``SDISTS``, more
pmap-era releases fetched as source archives with ``pip download --no-deps --no-binary :all:``
into ``~/.cache/jaxmigrate/sdists``, never the checkout) and reads its JM101 findings, one per
pmap site: a site whose finding's fix moves the module to the global view is counted as such; every other site is put in the group of the blocker its
finding names (``global view not possible: line N: <why>``), or of the reason the site is not
rewritten at all. Where the finding also says the step itself would compute something else over
the whole batch (``and with it laid out as a batch, the step still would not compute the same``),
that is the group: no input pipeline changes it. Prints, per PATH, the sites, the global view's
share and the groups, largest first, with one finding's words for each.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from corpus import fetched, legacy_corpus  # noqa: E402

REALCODE = Path(os.environ.get("JAXMIGRATE_REALCODE", "~/.cache/jaxmigrate/realcode")).expanduser()
GLOBAL_VIEW = "to the global view"  # (in the message of JM101's fix that moves the module there)
BLOCKER = re.compile(r"global view not possible: (?:line \d+: )?(?P<why>.*)", re.S)

SDIST_CACHE = Path("~/.cache/jaxmigrate/sdists").expanduser()
# Releases with pmap code beyond the corpus (their examples and libraries as published).
SDISTS = (("clu", "0.0.12"), ("dalle-mini", "0.1.5"), ("diffusers", "0.13.0"), ("dm-acme", "0.4.0"),
          ("dm-haiku", "0.0.10"), ("evosax", "0.1.3"), ("fedjax", "0.0.15"), ("flaxdiff", "0.2.11"),
          ("jax-resnet", "0.0.3"), ("jraph", "0.0.6.dev0"), ("jumanji", "0.2.2"), ("kfac-jax", "0.0.3"),
          ("optax", "0.1.4"), ("qdax", "0.2.2"), ("rlax", "0.1.5"), ("transformers", "4.26.0"),
          ("uncertainty_baselines", "0.0.7"))

# (group, pattern of the blocker's words), first match wins; a blocker matching none is "other".
GROUPS = (
    ("a step a function makes and never uses (it keeps pmap while the module's other steps move)",
     r"never used|never called"),
    ("pmap or jit chosen at run time (a flag, the device count): the program's two modes",
     r"one of two modes"),
    ("the step not proven to compute the same over the whole batch (per-device statistics, ratios of "
     "per-device sums, collectives with no global-view equivalent, functions whose body is not read)",
     r"has no global-view equivalent|not proven a per-shard|not the same per shard and globally|"
     r"not known to treat examples independently|batch statistics|transform_with_state|each device's own"),
    ("the pmapped function is another module's, an object's or a method (its body is not read here)",
     r"the pmapped function is not a `"),
    ("pmap itself used as a value, or the step passed, stored or returned where it is not followed",
     r"used as a value|passed to another call|only calls and decorators"),
    ("an argument not made by a replicate / shard the fix recognises (an input pipeline, another "
     "module's state)", r"is not made by a replicate|is not shown replicated|not shown to have the device count"),
    ("`devices=` a subset, or a list the caller passes", r"`devices=`|devices="),
    ("another pmap option the global view does not take (`backend=`, `axis_size=`, static positions it "
     "cannot read or a static argument given by keyword)",
     r"has no global-view counterpart|static arguments|static_broadcasted_argnums=` other than|is static"),
    ("the axis name is not a literal string (a parameter, a constant of another module)",
     r"is not a literal string"),
    ("a function driving the step used other than by calling it, or with *args / **kwargs",
     r"used other than by calling it|takes \*args|starred arguments|called inside a lambda"),
    ("a name holding the device axis on one path and not another (after a loop that may run no time)",
     r"on one path to here and not on another"),
    ("comments inside the pmap call (the rewrite would drop them)", r"comments inside the pmap call"),
    ("`pad_shard_unpad` around the step (its padding would have to be written out)", r"pad_shard_unpad"),
    ("the module runs as several processes and the step's values are not followed there",
     r"runs as several processes"),
)


def sdists() -> Path:
    """``SDISTS`` unpacked into ``SDIST_CACHE/src`` (each fetched once, then reused)."""
    return fetched(SDISTS, SDIST_CACHE, sources_only=True)


def findings(path: Path) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "jaxmigrate", "check", "--unsafe-fixes", "--no-cache",
                           "--output-format", "json", str(path)], capture_output=True, text=True, cwd=REPO)
    if done.returncode not in (0, 1):
        raise SystemExit(f"jaxmigrate check {path} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return [f for f in json.loads(done.stdout) if f["code"] == "JM101"]


def group_of(message: str) -> tuple[str, str]:
    """The group of a site's finding that does not offer the global view, and the words it used."""
    match = BLOCKER.search(message)
    why = match["why"] if match else message[message.find("not rewritten"):]
    clauses = re.split(r"; (?:and )?", why)
    for group, pattern in GROUPS:
        for clause in clauses:
            if re.search(pattern, clause):
                return group, clause
    return "other", clauses[0]


def survey(path: Path) -> tuple[int, int, Counter, dict[str, str]]:
    sites = findings(path)
    groups: Counter = Counter()
    example: dict[str, str] = {}
    taken = 0
    for finding in sites:
        if GLOBAL_VIEW in (finding.get("fix") or {}).get("message", ""):
            taken += 1
            continue
        group, why = group_of(finding["message"])
        groups[group] += 1
        example.setdefault(group, why[:200])
    return len(sites), taken, groups, example


def markdown(path: Path, total: int, taken: int, groups: Counter, example: dict[str, str]) -> str:
    share = f"{taken / total:.0%}" if total else "-"
    lines = [f"`{path}`: {total} pmap sites, {taken} take the global view ({share})", "",
             "| sites | what keeps them | in one finding's words |",
             "| ---: | --- | --- |"]
    lines += [f"| {count} | {group} | {example[group]} |" for group, count in groups.most_common()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--sdists", action="store_true", help="also the releases of SDISTS, as source archives")
    parser.add_argument("--markdown", type=Path, help="also write the tables there")
    args = parser.parse_args(argv)
    paths = args.paths or [legacy_corpus(), *([REALCODE] if REALCODE.is_dir() else [])]
    if args.sdists:
        paths.append(sdists())
    out = []
    for path in paths:
        out.append(markdown(path, *survey(path)))
        print(out[-1])
    if args.markdown:
        args.markdown.write_text("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
