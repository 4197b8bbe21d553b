"""Real legacy training programs, original against migrated, end to end (issue 18's corpus).

    python benchmarks/real_programs.py [--only NAME ...] [--repeat 3] [--no-processes] [--reuse]
                                       [--markdown FILE.md] [--programs-json FILE.json]

Each program of ``benchmarks/real_programs/`` is a driver: a ``main()`` that runs one public
training program of the legacy corpus (``benchmarks/corpus.py``: brax 0.0.16, evojax 0.2.17,
jaxline 0.0.8) with its modules whole, only data and configuration chosen (a tiny environment, a
few steps, fixed seeds), and returns its metrics and parameters. For each project this script

1. copies the package from the corpus cache into ``~/.cache/jaxmigrate/real_programs/<project>/``
   twice, as ``old/`` and ``new/`` (never into the checkout);
2. lists the findings of ``jaxmigrate check --output-format json`` on the ORIGINAL tree, then runs
   ``python -m jaxmigrate check --fix --unsafe-fixes`` (this checkout's code) on ``new/`` only;
3. puts each driver beside both trees, as ``driver_<name>.py`` (the driver itself is not migrated);
4. runs ``jaxmigrate verify old/driver_x.py new/driver_x.py --entry main --devices 8 --timing``,
   the old side on the JAX the project ran on (a cached venv), the new side on JAX 0.10.2 (a venv
   with current flax/optax, built here); a program that is multi-host (its modules ask
   ``jax.process_count``/``process_index`` and do not refuse several processes) also as
   ``--processes 2 --devices 1 --connect after-import`` (jax 0.4.30 runs CPU collectives across
   processes with one device per process only).

It prints and writes (``--markdown``) one row per program: the pmap sites in the modules the
driver imports, how many the fix moved to the global view, to the exact ``jit(shard_map(vmap))``
rewrite, or kept as pmap (with the findings' reasons), whether old and new are equal, and the
compilations and run time of ``main()`` (old / new). ``--programs-json`` writes the pairs in the
format of ``benchmarks/bench_migrated.py --programs`` (with ``new_python``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from corpus import legacy_corpus  # noqa: E402

DRIVERS = HERE / "real_programs"
WORK = Path(os.environ.get("JAXMIGRATE_REAL_PROGRAMS", "~/.cache/jaxmigrate/real_programs")).expanduser()
VENVS = Path.home() / ".cache" / "jaxmigrate" / "venvs"

# The programs' own dependencies that are not JAX (brax's physics imports trimesh, its envs gym).
EXTRAS = ["trimesh", "gym", "dm-env", "ml_collections", "wrapt", "cma", "Pillow"]


@dataclass(frozen=True)
class Venv:
    """An interpreter: a venv made once (``pip install`` of ``requirements``) and cached."""

    name: str
    requirements: tuple[str, ...]
    base_python: str = sys.executable

    @property
    def python(self) -> Path:
        return VENVS / self.name / "bin" / "python"

    def ensure(self) -> Path:
        marker = VENVS / self.name / ".real-programs-ready"
        wanted = "\n".join(self.requirements)
        if marker.is_file() and marker.read_text() == wanted and self.python.exists():
            return self.python
        if not self.python.exists():
            _run([self.base_python, "-m", "venv", str(VENVS / self.name)])
        _run([str(self.python), "-m", "pip", "install", "--quiet", *self.requirements])
        marker.write_text(wanted)
        return self.python


# brax 0.0.16 (Nov 2022) predates every jaxlib this machine can install (the oldest is 0.4.13);
# the oldest runs it, and still has `jax.experimental.maps.Mesh` (its replay buffer imports it).
JAX_0_4_13 = Venv("jax-0.4.13+brax", ("jax==0.4.13", "jaxlib==0.4.13", "flax==0.7.0", "optax==0.1.7",
                                     "chex==0.1.82", "numpy<1.26", "scipy<1.12", "ml_dtypes==0.2.0",
                                     "orbax-checkpoint==0.2.7", "tensorstore<0.1.46", "absl-py", *EXTRAS))
# The venv the test suite uses for legacy code (jaxmigrate.runtime_checks.legacy_env), plus EXTRAS.
JAX_0_4_30 = Venv("jax-0.4.30+flax==0.8.5", ("jax[cpu]==0.4.30", "numpy<2", "ml_dtypes<0.5", "scipy<1.14",
                                             "flax==0.8.5", *EXTRAS))
JAX_0_10_2 = Venv("jax-0.10.2+flax", ("jax==0.10.2", "jaxlib==0.10.2", "flax", "optax", "chex", "absl-py",
                                      *EXTRAS))


@dataclass(frozen=True)
class Project:
    name: str
    glob: str  # the unpacked release in the corpus cache
    package: str  # the package folder inside it
    old: Venv


PROJECTS = {
    "brax": Project("brax", "brax-0.0.16-*", "brax", JAX_0_4_13),
    "evojax": Project("evojax", "evojax-0.2.17-*", "evojax", JAX_0_4_30),
    "jaxline": Project("jaxline", "jaxline/jaxline-0.0.8", "jaxline", JAX_0_4_30),
}


@dataclass(frozen=True)
class RealProgram:
    name: str  # the driver's module name in benchmarks/real_programs/
    project: str
    program: str  # the module the driver runs
    multi_host: bool  # the program supports several processes


# brax 0.0.16's PPO, APG and SAC ask jax.process_count() but cannot finish on a process other than
# 0 with any JAX: they bind `metrics` on process 0 only and return it (UnboundLocalError).
PROGRAMS = [
    RealProgram("brax_ppo", "brax", "brax/training/agents/ppo/train.py", False),
    RealProgram("brax_apg", "brax", "brax/training/agents/apg/train.py", False),
    RealProgram("brax_sac", "brax", "brax/training/agents/sac/train.py", False),
    RealProgram("brax_es", "brax", "brax/training/agents/es/train.py", False),  # raises with >1 process
    RealProgram("brax_ars", "brax", "brax/training/agents/ars/train.py", False),  # raises with >1 process
    RealProgram("evojax_cartpole", "evojax", "evojax/trainer.py", False),
    RealProgram("jaxline_regression", "jaxline", "jaxline/train.py", True),
]


@dataclass
class Row:
    program: RealProgram
    modules: list[str] = field(default_factory=list)
    sites: Counter = field(default_factory=Counter)  # global / exact / kept
    reasons: dict = field(default_factory=dict)  # (path, line) of a pmap site -> its reasons
    runs: dict[str, dict] = field(default_factory=dict)  # "8 devices" / "2 processes" -> summary


def _run(cmd) -> None:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"`{' '.join(map(str, cmd[:5]))}` failed: {done.stderr.strip()[-800:]}")


def _jaxmigrate(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "jaxmigrate", *args], capture_output=True, text=True,
                          env=env, cwd=cwd)


def prepare(project: Project) -> tuple[Path, list[dict], str]:
    """old/ and new/ for one project; the original tree's findings; the fix's summary line."""
    [release] = sorted(legacy_corpus().glob(project.glob))
    base = WORK / project.name
    for side in ("old", "new"):
        shutil.rmtree(base / side, ignore_errors=True)
        shutil.copytree(release / project.package, base / side / project.package,
                        ignore=shutil.ignore_patterns("__pycache__"))
        for path in (base / side).rglob("*"):  # the corpus is unpacked read-only
            path.chmod(path.stat().st_mode | 0o200)
    found = _jaxmigrate("check", str(base / "old" / project.package), "--output-format", "json", "--no-cache",
                        "--exit-zero")
    findings = json.loads(found.stdout)
    fixed = _jaxmigrate("check", "--fix", "--unsafe-fixes", "--no-cache", "--exit-zero",
                        str(base / "new" / project.package))
    summary = " ".join((fixed.stdout + fixed.stderr).strip().splitlines()[-2:])
    return base, findings, summary


def imported_modules(base: Path, program: RealProgram, python: Path) -> list[str]:
    """The files of the project's tree the driver imports (on the old side): the program's modules."""
    code = ("import sys, os; sys.path.insert(0, os.getcwd()); import driver_%s\n"
            "root = os.getcwd() + os.sep\n"
            "print('\\n'.join(sorted(os.path.relpath(m.__file__, root) for m in list(sys.modules.values())\n"
            "      if getattr(m, '__file__', None) and m.__file__.startswith(root) and 'driver_' not in m.__file__)))"
            % program.name)
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=base / "old", env=env)
    if done.returncode != 0:
        return []
    return [line for line in done.stdout.splitlines() if line.endswith(".py")]


def classify(row: Row, findings: list[dict], base: Path) -> None:
    """Every `jax.pmap` site (JM101) in the program's modules: what the fix does with it, and why."""
    modules = {str(base / "old" / m) for m in row.modules}
    for finding in findings:
        if finding["code"] != "JM101" or finding["path"] not in modules:
            continue
        fix = (finding.get("fix") or {}).get("message", "")
        if fix.startswith("move the module's pmapped steps"):
            row.sites["global"] += 1
        elif fix:
            row.sites["exact"] += 1
        else:
            row.sites["kept"] += 1
        site = (str(Path(finding["path"]).relative_to(base / "old")), finding["line"])
        row.reasons[site] = [_kind(marker, finding["message"].split(marker, 1)[1].split(";")[0])
                             for marker in ("not rewritten: ", "global view not possible: ")
                             if marker in finding["message"]]


def _kind(marker: str, reason: str) -> str:
    """A reason without what names its site (line numbers, the names in backticks), so that the
    same kind of reason counts once over the sites that give it."""
    reason = re.sub(r"^line \d+: ", "", reason)
    reason = re.sub(r"argument (\d+) of `[^`]*` \(`[^`]*`\)", r"argument \1 of the step", reason)
    reason = re.sub(r"\(`(jax\.process_\w+)` at line \d+\)", r"(`\1`)", reason)
    return ("global view: " if marker.startswith("global") else "exact rewrite: ") + reason


def verify(base: Path, program: RealProgram, old: Path, new: Path, processes: int, args) -> dict:
    driver = f"driver_{program.name}.py"
    out = base / f"verify_{program.name}_{processes}p.json"
    cmd = ["verify", str(base / "old" / driver), str(base / "new" / driver), "--entry", "main",
           "--old-python", str(old), "--new-python", str(new), "--unreplicate", "old",
           "--timing", "--warmup", "0", "--repeat", str(args.repeat), "--timeout", str(args.timeout),
           "--json", str(out)]
    if processes > 1:
        # jax 0.4.30 runs CPU collectives across processes with one device per process only.
        cmd += ["--processes", str(processes), "--devices", "1", "--connect", "after-import"]
    else:
        cmd += ["--devices", "8"]
    if args.reuse and out.is_file():  # a report of an earlier run, re-tabled
        report = json.loads(out.read_text())
        return {"exit": report["exit_code"], "seconds": 0.0, "report": report, "stderr": "",
                "command": "python -m jaxmigrate " + " ".join(cmd)}
    start = time.monotonic()
    done = _jaxmigrate(*cmd)
    seconds = time.monotonic() - start
    report = json.loads(out.read_text()) if out.is_file() else {}
    return {"exit": done.returncode, "seconds": seconds, "report": report, "stderr": done.stderr[-2000:],
            "command": "python -m jaxmigrate " + " ".join(cmd)}


def summarise(run: dict) -> dict:
    """equal / differs / failed, compilations (first call + later calls) and the median time of
    main() (each call a whole training run, its compilations included), old / new."""
    report = run["report"]
    status = {0: "equal", 1: "differs", 2: "failed"}.get(run["exit"], f"exit {run['exit']}")
    entry = (report.get("entries") or [{}])[0]

    def compiles(side):
        t = (entry.get(side) or {}).get("timing")
        return f"{len(t['compilations'])}+{len(t['later_compilations'])}" if t else "-"

    def median(side):
        return ((entry.get(side) or {}).get("timing") or {}).get("median")

    if status == "failed":  # which side, and did the other one run
        ran = {side: (entry.get(side) or {}).get("status") == "ok" for side in ("old", "new")}
        status += " (" + ", ".join(f"{side} {'ran' if ok else 'failed'}" for side, ok in ran.items()) + ")"
    sides = report.get("sides") or {}
    jax = " / ".join((sides.get(side) or {}).get("jax_version") or "?" for side in ("old", "new"))
    return {"status": status, "jax": jax, "compiles": (compiles("old"), compiles("new")),
            "median": (median("old"), median("new")), "more": _compiled_more(entry),
            "failure": _failure_text(report, entry) if status != "equal" else ""}


def _compiled_more(entry: dict) -> str:
    """What the new side compiled more often than the old one, by name (pmap's compilations are
    named after the function on 0.4, `jit(_fun)` on 0.10, so a kept pmap shows as renamed)."""
    counts = {}
    for side, sign in (("new", 1), ("old", -1)):
        timing = (entry.get(side) or {}).get("timing") or {}
        for c in (timing.get("compilations") or []) + (timing.get("later_compilations") or []):
            counts[c["name"]] = counts.get(c["name"], 0) + sign
    more = sorted(((n, name) for name, n in counts.items() if n > 0), reverse=True)
    return ", ".join(f"{name} +{n}" for n, name in more[:6])


def _failure_text(report: dict, entry: dict) -> str:
    for where in ("old", "new"):
        failure = ((report.get("sides") or {}).get(where) or {}).get("failure") or \
            (entry.get(where) or {}).get("failure")
        if failure:
            return f"{where} side: {failure.get('kind')}: {_first_line(failure.get('message', ''))}"
    leaves = [leaf for leaf in entry.get("leaves") or [] if not leaf.get("equal")]
    if leaves:
        return "differs at " + ", ".join(f"{leaf['path']} ({leaf.get('reason') or 'max rel %.3g' % leaf['max_rel']})"
                                         for leaf in leaves[:4])
    return entry.get("status", "")


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0][:400] if message.strip() else ""


def _seconds(value) -> str:
    return "-" if value is None else f"{value:.2f} s"


def markdown(rows: list[Row]) -> str:
    lines = ["| program | runs | pmap sites (modules it imports) | global view / exact / kept pmap | JAX old / new | "
             "8 devices: old vs new | compilations old / new | main() old / new | 2 processes x 1 device |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        single = row.runs.get("8 devices")
        multi = row.runs.get("2 processes")
        s = summarise(single) if single else None
        m = summarise(multi) if multi else None
        sites = sum(row.sites.values())
        lines.append("| {} | `{}` | {} | {} / {} / {} | {} | {} | {} | {} | {} |".format(
            row.program.name, row.program.program, sites, row.sites["global"], row.sites["exact"], row.sites["kept"],
            s["jax"] if s else "", s["status"] if s else "not run", " / ".join(s["compiles"]) if s else "",
            " / ".join(_seconds(v) for v in s["median"]) if s else "",
            m["status"] if m else "not run (see below)"))
    sites = {site: reasons for row in rows for site, reasons in row.reasons.items()}
    if sites:
        kinds = Counter(kind for reasons in sites.values() for kind in reasons)
        lines += ["", f"Why the {len(sites)} distinct pmap sites (some modules serve several programs) were not "
                  "rewritten, from the findings on the original trees (a site gives one reason for each path it "
                  "could take):", ""]
        lines += [f"- {n} x {kind}" for kind, n in kinds.most_common()]
    failures = [(row.program.name, where, summarise(run)["failure"]) for row in rows
                for where, run in row.runs.items() if summarise(run)["status"] != "equal"]
    if failures:
        lines += ["", "Failures and differences:", ""]
        lines += [f"- {name} ({where}): {text}" for name, where, text in failures]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", help="driver names (default: all)")
    parser.add_argument("--repeat", type=int, default=3, help="timed calls of main() per side")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--no-processes", action="store_true", help="skip the 2-process runs")
    parser.add_argument("--reuse", action="store_true",
                        help="table the verify reports of the last run instead of running them again")
    parser.add_argument("--markdown", type=Path, default=WORK / "real_programs.md")
    parser.add_argument("--programs-json", type=Path)
    args = parser.parse_args(argv)

    programs = [p for p in PROGRAMS if not args.only or p.name in args.only]
    new_python = JAX_0_10_2.ensure()
    prepared: dict[str, tuple[Path, list[dict], str]] = {}
    rows = []
    for program in programs:
        project = PROJECTS[program.project]
        old_python = project.old.ensure()
        if project.name not in prepared:
            prepared[project.name] = prepare(project)
            print(f"{project.name}: fix: {prepared[project.name][2]}", flush=True)
        base, findings, _ = prepared[project.name]
        for side in ("old", "new"):
            shutil.copy(DRIVERS / f"{program.name}.py", base / side / f"driver_{program.name}.py")
        row = Row(program, imported_modules(base, program, old_python))
        classify(row, findings, base)
        row.runs["8 devices"] = verify(base, program, old_python, new_python, 1, args)
        if program.multi_host and not args.no_processes:
            row.runs["2 processes"] = verify(base, program, old_python, new_python, 2, args)
        rows.append(row)
        for where, run in row.runs.items():
            s = summarise(run)
            print(f"{program.name} [{where}]: {s['status']} in {run['seconds']:.0f} s; compilations {s['compiles']}; "
                  f"main() {tuple(_seconds(v) for v in s['median'])} {s['failure']}", flush=True)
    table = markdown(rows)
    print(table)
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    args.markdown.write_text(table)
    if args.programs_json:
        args.programs_json.write_text(json.dumps([
            {"name": f"real/{row.program.name}", "old": str(WORK / row.program.project / "old" /
                                                         f"driver_{row.program.name}.py"),
             "new": str(WORK / row.program.project / "new" / f"driver_{row.program.name}.py"),
             "old_python": str(PROJECTS[row.program.project].old.python), "new_python": str(new_python)}
            for row in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
