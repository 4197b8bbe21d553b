"""The command line contract: options, exit codes, --fix / --diff, stdin, the console script.

Most tests run the CLI in-process on the test-only rules (see conftest). The tests at the end run
the installed console script in a subprocess on the real rules (JM101 legacy-pmap, JM201
legacy-pjit), including one where jax cannot be imported at all.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from jaxmigrate import engine
from jaxmigrate.cache import CACHE_DIR
from jaxmigrate.cli import main
from jaxmigrate.engine import MIN_FILES_FOR_POOL
from jaxmigrate.lint.output import FORMATS


def jaxmigrate(*args: str, input: str | bytes | None = None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def findings(output: str) -> list[tuple[str, str, int]]:
    """(path, code, line) of every finding in ``--output-format json`` output."""
    return [(item["path"], item["code"], item["line"]) for item in json.loads(output)]


@pytest.fixture
def files(project, test_rules):
    (project / "a.py").write_text("import x\nx.legacy\n")
    (project / "clean.py").write_text("import x\nx.modern\n")
    return project


# --- invocation and exit codes -----------------------------------------------------------------


def test_check_is_the_default_command(files):
    implicit = jaxmigrate("a.py", "--output-format", "json")
    explicit = jaxmigrate("check", "a.py", "--output-format", "json")
    assert (implicit.exit_code, implicit.stdout) == (explicit.exit_code, explicit.stdout)
    assert findings(explicit.stdout) == [("a.py", "JM901", 2)]


@pytest.mark.parametrize(
    "args, exit_code",
    [
        pytest.param(["clean.py"], 0, id="no findings: 0"),
        pytest.param(["a.py"], 1, id="findings remain: 1"),
        pytest.param(["a.py", "--exit-zero"], 0, id="--exit-zero: 0 despite findings"),
        pytest.param(["empty"], 0, id="no files at all: 0"),
        pytest.param(["a.py", "--select", "JM902,JM903"], 0, id="--select comma-separated"),
        pytest.param(["a.py", "--ignore", "JM9"], 0, id="--ignore by prefix"),
        pytest.param(["a.py", "--select", "JM999"], 2, id="unknown code: 2"),
        pytest.param(["a.py", "--target-jax", "ten"], 2, id="malformed --target-jax: 2"),
        pytest.param(["a.py", "--fix", "--diff"], 2, id="--fix with --diff: 2"),
        pytest.param(["a.py", "--no-such-option"], 2, id="unknown option: 2"),
        pytest.param(["a.py", "--jobs", "0"], 2, id="--jobs must be positive: 2"),
        pytest.param(["a.py", "--output-format", "xml"], 2, id="unknown format: 2"),
    ],
)
def test_exit_codes(files, args, exit_code):
    (files / "empty").mkdir()
    assert jaxmigrate("--output-format", "json", *args).exit_code == exit_code


def test_an_unknown_config_key_is_exit_2_naming_it(files):
    (files / "pyproject.toml").write_text("[tool.jaxmigrate]\nselekt = []\n")
    result = jaxmigrate("a.py")
    assert result.exit_code == 2
    assert "selekt" in result.stderr


def test_an_unknown_code_in_config_is_exit_2_naming_it(files):
    (files / "pyproject.toml").write_text('[tool.jaxmigrate]\nignore = ["JM9999"]\n')
    result = jaxmigrate("a.py")
    assert result.exit_code == 2
    assert "JM9999" in result.stderr


def test_config_is_read_from_pyproject_and_from_config_option(files):
    (files / "pyproject.toml").write_text('[tool.jaxmigrate]\nignore = ["JM901"]\n')
    assert jaxmigrate("a.py", "--output-format", "json").exit_code == 0
    (files / "other.toml").write_text('select = ["JM901"]\n')
    result = jaxmigrate("a.py", "--config", "other.toml", "--output-format", "json")
    assert findings(result.stdout) == [("a.py", "JM901", 2)]


def test_per_file_ignores_from_config(files):
    (files / "pyproject.toml").write_text(
        '[tool.jaxmigrate.per-file-ignores]\n"a.py" = ["JM901"]\n'
    )
    (files / "b.py").write_text("x.legacy\n")
    result = jaxmigrate(".", "--output-format", "json")
    assert findings(result.stdout) == [("b.py", "JM901", 1)]


def test_an_internal_error_is_exit_2_with_a_traceback(files, monkeypatch):
    def explode(*args, **kwargs):
        raise RuntimeError("engine bug")

    monkeypatch.setattr(engine, "run_paths", explode)
    result = jaxmigrate("a.py")
    assert result.exit_code == 2
    assert "internal error" in result.stderr and "RuntimeError: engine bug" in result.stderr


@pytest.mark.parametrize("output_format", list(FORMATS))
def test_every_output_format_reports_and_sets_the_exit_code(files, output_format):
    result = jaxmigrate(".", "--output-format", output_format)
    assert result.exit_code == 1
    assert "JM901" in result.stdout


# --- bad input is a finding, and the run goes on -----------------------------------------------


def test_unparseable_and_unreadable_files_are_JM000_and_the_run_goes_on(files):
    (files / "broken.py").write_text("x.legacy\ndef f(:\n")
    (files / "nul.py").write_bytes(b"x.legacy\x00\n")
    (files / "latin.py").write_bytes(b"x.legacy\ny = '\xe9'\n")  # no cookie: invalid UTF-8 on line 2
    (files / "dangling.py").symlink_to(files / "nowhere.py")
    result = jaxmigrate(
        "a.py", "broken.py", "nul.py", "latin.py", "dangling.py", "--output-format", "json"
    )
    assert result.exit_code == 1
    assert sorted(findings(result.stdout)) == [
        ("a.py", "JM901", 2),
        ("broken.py", "JM000", 2),
        ("dangling.py", "JM000", 1),
        ("latin.py", "JM000", 2),
        ("nul.py", "JM000", 1),
    ]


def test_a_crashing_rule_is_JM001_and_other_findings_remain(files):
    (files / "c.py").write_text("boom\nx.legacy\n")
    result = jaxmigrate("c.py", "--output-format", "json")
    assert findings(result.stdout) == [("c.py", "JM001", 1), ("c.py", "JM901", 2)]
    assert "JM903" in json.loads(result.stdout)[0]["message"]


@pytest.mark.parametrize("jobs", ["1", "2"], ids=["serial", "pool"])
def test_a_file_too_deep_to_parse_costs_only_that_file(files, jobs):
    """CPython's parser raises RecursionError on ~3,000 chained `+`: one JM000, and --fix still
    fixes (and reports) every other file."""
    deep = "x.legacy\ny = " + " + ".join(["1"] * 3_000) + "\n"
    (files / "deep.py").write_text(deep)
    for i in range(MIN_FILES_FOR_POOL):
        (files / f"m{i:03}.py").write_text("x.legacy\n")
    checked = jaxmigrate(".", "--no-cache", "--jobs", jobs, "--output-format", "json")
    assert checked.exit_code == 1
    assert ("deep.py", "JM000", 1) in findings(checked.stdout)
    assert len(findings(checked.stdout)) == MIN_FILES_FOR_POOL + 2  # a.py, m*.py, deep.py
    fixed = jaxmigrate(".", "--no-cache", "--jobs", jobs, "--fix", "--output-format", "json")
    assert (fixed.exit_code, findings(fixed.stdout)) == (1, [("deep.py", "JM000", 1)])
    assert (files / "m000.py").read_text() == "x.modern\n" and (files / "deep.py").read_text() == deep


def test_fix_leaves_a_read_only_file_alone_with_its_findings_and_why(files):
    os.chmod(files / "a.py", 0o444)
    result = jaxmigrate(".", "--fix")
    assert result.exit_code == 1
    assert (files / "a.py").read_text() == "import x\nx.legacy\n"
    assert "a.py:1:1 JM000 cannot write a.py: the file is read-only; not fixed" in result.stdout
    assert "a.py:2:1 JM901 legacy attribute" in result.stdout
    assert "0 fixed, 2 left of 2 found" in result.stdout


SUMMARY_AFTER_FIX = re.compile(r"^(\d+) fixed, (\d+) left of (\d+) found(?:, and (\d+) new after fixing)?")


def test_the_fix_summary_adds_up_from_one_run_to_the_next(project):
    """A fix can make other findings moot (the global view drops the pmap's `unreplicate`) and
    bring new ones to light; the counts are of findings, so each line adds up and the next run
    starts from what the last one left."""
    (project / "train.py").write_text(textwrap.dedent(
        """\
        import functools
        import jax
        import jax.numpy as jnp
        import numpy as np
        from flax import jax_utils
        from jax.experimental.pjit import pjit
        from jax.sharding import PositionalSharding


        @functools.partial(jax.pmap, axis_name="batch")
        def train_step(state, batch):
            return state + jax.lax.pmean(batch, "batch")


        def main():
            state = jax_utils.replicate(jnp.zeros(3))
            state = train_step(state, np.ones((jax.local_device_count(), 4, 3)))
            s = PositionalSharding(jax.devices()).reshape(4, 2)
            y = jax.tree_map(lambda x: x, state)
            return jax_utils.unreplicate(state), s, pjit(lambda x: x * 2), y
        """
    ))
    listed = None
    for args in (["--fix"], ["--fix", "--unsafe-fixes"]):
        result = jaxmigrate("train.py", "--no-cache", "--output-format", "concise", *args)
        *shown, summary = result.stdout.splitlines()
        fixed, left, found, new = (int(n or 0) for n in SUMMARY_AFTER_FIX.match(summary).groups())
        assert fixed + left == found and left + new == len(shown), result.stdout
        assert listed is None or found == listed
        listed = len(shown)


def test_fix_skips_a_file_edited_while_it_ran_and_says_so(files, monkeypatch):
    real = engine.process_raw

    def process_raw(raw, display_path, codes, job):
        result = real(raw, display_path, codes, job)
        Path(display_path).write_text("import x\nx.legacy  # a user's edit\n")
        return result

    monkeypatch.setattr(engine, "process_raw", process_raw)
    result = jaxmigrate("a.py", "--fix")
    assert result.exit_code == 1
    assert "a.py changed while it was being fixed; not written (run jaxmigrate again)" in result.stdout
    assert (files / "a.py").read_text() == "import x\nx.legacy  # a user's edit\n"


def test_noqa_and_skip_file_in_strings_hide_nothing(files):
    (files / "s.py").write_text('x.legacy; s = "# noqa"\n')
    (files / "d.py").write_text('"""Opt out with a comment:\n# jaxmigrate: skip-file\n"""\nx.legacy\n')
    (files / "c.py").write_text('x.legacy  # noqa: JM901\n')
    result = jaxmigrate("s.py", "d.py", "c.py", "--output-format", "json")
    assert findings(result.stdout) == [("d.py", "JM901", 4), ("s.py", "JM901", 1)]


@pytest.mark.parametrize("output_format", ["text", "concise"])
@pytest.mark.parametrize("flag", ["-q", "--quiet"])
def test_quiet_prints_the_findings_and_no_summary(files, output_format, flag):
    loud = jaxmigrate(".", "--output-format", output_format)
    quiet = jaxmigrate(".", flag, "--output-format", output_format)
    assert "1 finding, 1 fixable" in loud.stdout
    assert quiet.stdout == loud.stdout.replace("1 finding, 1 fixable\n", "")
    assert "JM901" in quiet.stdout and quiet.exit_code == loud.exit_code == 1
    clean = jaxmigrate("clean.py", flag, "--output-format", output_format)
    assert (clean.exit_code, clean.stdout) == (0, "")  # not even "All checks passed"


def test_quiet_diff_prints_the_diff_only(files):
    result = jaxmigrate(".", "--diff", "-q")
    assert result.exit_code == 1 and result.stdout.startswith("--- a/a.py") and result.stderr == ""


def test_quiet_fix_prints_what_is_left_and_no_summary(files):
    (files / "b.py").write_text("risky()\n")
    result = jaxmigrate(".", "--fix", "-q", "--output-format", "concise")
    assert result.stdout == "b.py:1:1: JM902 risky call\n"


# --- discovery from the command line ----------------------------------------------------------


def test_excluded_files_are_checked_when_named_unless_force_exclude(files):
    (files / "pyproject.toml").write_text('[tool.jaxmigrate]\nextend-exclude = ["gen"]\n')
    (files / "gen").mkdir()
    (files / "gen" / "g.py").write_text("x.legacy\n")
    assert findings(jaxmigrate(".", "--output-format", "json").stdout) == [("a.py", "JM901", 2)]
    named = jaxmigrate("gen/g.py", "--output-format", "json")
    assert findings(named.stdout) == [("gen/g.py", "JM901", 1)]
    forced = jaxmigrate("gen/g.py", "--force-exclude", "--output-format", "json")
    assert (forced.exit_code, findings(forced.stdout)) == (0, [])


def test_gitignored_files_are_skipped_in_directories(files):
    (files / ".git").mkdir()
    (files / ".gitignore").write_text("a.py\n")
    assert jaxmigrate(".", "--output-format", "json").exit_code == 0

def test_a_symlinked_file_is_reported_and_fixed_once(files):
    (files / "link.py").symlink_to("a.py")
    assert findings(jaxmigrate(".", "--output-format", "json").stdout) == [("a.py", "JM901", 2)]
    fixed = jaxmigrate(".", "--fix", "--no-cache", "--output-format", "json")
    assert (fixed.exit_code, fixed.stdout.strip()) == (0, "[]")
    assert (files / "link.py").is_symlink() and (files / "a.py").read_text() == "import x\nx.modern\n"


# --- --fix, --diff ------------------------------------------------------------------------------


def test_fix_writes_and_exits_0_when_nothing_remains(files):
    result = jaxmigrate(".", "--fix", "--output-format", "json")
    assert result.exit_code == 0
    assert (files / "a.py").read_text() == "import x\nx.modern\n"


def test_fix_exits_1_when_findings_remain(files):
    (files / "b.py").write_text("risky()\n")
    result = jaxmigrate(".", "--fix", "--output-format", "json")
    assert result.exit_code == 1
    assert findings(result.stdout) == [("b.py", "JM902", 1)]


def test_unsafe_fixes_on_request(files):
    (files / "b.py").write_text("risky()\n")
    assert jaxmigrate(".", "--fix", "--unsafe-fixes", "--output-format", "json").exit_code == 0
    assert (files / "b.py").read_text() == "careful()\n"


@pytest.mark.parametrize(
    "paths, exit_code",
    [
        pytest.param(["a.py"], 1, id="a file changed: 1"),
        pytest.param(["clean.py"], 0, id="nothing changed: 0"),
    ],
)
def test_exit_non_zero_on_fix(files, paths, exit_code):
    result = jaxmigrate(*paths, "--fix", "--exit-non-zero-on-fix", "--output-format", "json")
    assert result.exit_code == exit_code


def test_diff_prints_the_fix_and_changes_nothing(files):
    before = (files / "a.py").stat()
    result = jaxmigrate(".", "--diff")
    assert result.exit_code == 1
    assert "-x.legacy\n+x.modern\n" in result.stdout
    assert (files / "a.py").read_text() == "import x\nx.legacy\n"
    assert (files / "a.py").stat().st_mtime_ns == before.st_mtime_ns


@pytest.mark.parametrize(
    "args, exit_code",
    [
        pytest.param(["--diff"], 1, id="--diff with changes: 1"),
        pytest.param(["--diff", "--exit-zero"], 0, id="--diff --exit-zero: 0, as in ruff"),
        pytest.param(["--fix"], 1, id="--fix, a finding left: 1"),
        pytest.param(["--fix", "--exit-zero"], 0, id="--fix --exit-zero, a finding left: 0"),
        pytest.param(["--fix", "--exit-zero", "--exit-non-zero-on-fix"], 0, id="--exit-zero wins over on-fix"),
    ],
)
def test_exit_zero_in_every_mode(files, args, exit_code):
    (files / "b.py").write_text("x.legacy\nrisky()\n")  # one safe fix, one unsafe finding that stays
    result = jaxmigrate("b.py", *args)
    assert result.exit_code == exit_code
    assert (files / "b.py").read_text() == ("x.modern\nrisky()\n" if "--fix" in args else "x.legacy\nrisky()\n")


@pytest.mark.parametrize(
    "select, ignore, expected",
    [
        pytest.param("JM901", "JM9", ["JM901"], id="a longer --select wins over a shorter --ignore"),
        pytest.param("JM9", "JM901", ["JM902"], id="a longer --ignore wins over a shorter --select"),
        pytest.param("JM90", "JM9", ["JM901", "JM902"], id="longer by one character"),
        pytest.param("JM9", "JM90", [], id="longer by one character, the other way"),
    ],
)
def test_the_longer_prefix_wins_between_select_and_ignore(files, select, ignore, expected):
    (files / "b.py").write_text("x.legacy\nrisky()\n")
    result = jaxmigrate("b.py", "--select", select, "--ignore", ignore, "--output-format", "json")
    assert [code for _, code, _ in findings(result.stdout)] == expected


def test_diff_without_changes_exits_0_and_prints_nothing(files):
    (files / "b.py").write_text("risky()\n")  # unsafe only: --diff shows what --fix would do
    result = jaxmigrate("clean.py", "b.py", "--diff")
    assert (result.exit_code, result.stdout) == (0, "")


def test_fix_preserves_crlf_bom_and_latin1(files):
    (files / "crlf.py").write_bytes(b"x.legacy\r\n")
    (files / "bom.py").write_bytes(b"\xef\xbb\xbfx.legacy\n")
    (files / "latin.py").write_bytes(b"# coding: latin-1\ns = '\xe9'; x.legacy\n")
    assert jaxmigrate(".", "--fix", "--output-format", "json").exit_code == 0
    assert (files / "crlf.py").read_bytes() == b"x.modern\r\n"
    assert (files / "bom.py").read_bytes() == b"\xef\xbb\xbfx.modern\n"
    assert (files / "latin.py").read_bytes() == b"# coding: latin-1\ns = '\xe9'; x.modern\n"


# --- stdin -------------------------------------------------------------------------------------


def test_stdin_findings_carry_the_given_name(files):
    result = jaxmigrate(
        "--stdin-filename", "src/mod.py", "--output-format", "json", input="x.legacy\n"
    )
    assert result.exit_code == 1
    assert findings(result.stdout) == [("src/mod.py", "JM901", 1)]


def test_stdin_fix_prints_the_fixed_source(files):
    result = jaxmigrate("--stdin-filename", "mod.py", "--fix", "--output-format", "json", input="x.legacy\n")
    assert result.stdout == "x.modern\n"
    assert result.exit_code == 0
    assert not (files / "mod.py").exists()


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(b"# -*- coding: latin-1 -*-\ns = 'caf\xe9'\nx.legacy\n", id="latin-1 cookie"),
        pytest.param(b"\xef\xbb\xbfs = '\xc3\xa9'\r\nx.legacy\r\n", id="utf-8 BOM and CRLF"),
    ],
)
def test_stdin_fix_writes_the_source_back_in_its_own_encoding(files, source):
    # The caller (an editor, a pre-commit wrapper) writes stdout over the file: it must get the
    # file's own bytes back, not the text re-encoded in the terminal's encoding without its BOM.
    result = jaxmigrate("--stdin-filename", "mod.py", "--fix", input=source)
    assert result.stdout_bytes == source.replace(b"x.legacy", b"x.modern")
    assert result.exit_code == 0


@pytest.mark.parametrize(
    "source, exit_code",
    [
        pytest.param(b"# -*- coding: latin-1 -*-\ns = 'caf\xe9'\nx.modern\n", 0, id="nothing to fix"),
        pytest.param(b"s = '\xff'\nx.legacy\n", 1, id="undecodable: JM000, the input kept"),
    ],
)
def test_stdin_fix_passes_input_it_does_not_change_through_byte_for_byte(files, source, exit_code):
    result = jaxmigrate("--stdin-filename", "mod.py", "--fix", input=source)
    assert result.stdout_bytes == source
    assert result.exit_code == exit_code


@pytest.mark.parametrize("fix", [False, True], ids=["check", "fix"])
def test_force_exclude_applies_to_the_stdin_filename(files, fix):
    # Editors and pre-commit wrappers name every file: an excluded one is left alone, as on disk.
    (files / "pyproject.toml").write_text('[tool.jaxmigrate]\nextend-exclude = ["vendored"]\n')
    args = ["--stdin-filename", "vendored/mod.py", "--output-format", "json", *(["--fix"] if fix else [])]
    excluded = jaxmigrate(*args, "--force-exclude", input=b"x.legacy\n")
    assert excluded.exit_code == 0
    assert excluded.stdout_bytes == (b"x.legacy\n" if fix else b"[]\n")
    named = jaxmigrate(*args, input=b"x.legacy\n")  # without --force-exclude: checked as asked
    if fix:
        assert (named.exit_code, named.stdout_bytes) == (0, b"x.modern\n")
    else:
        assert named.exit_code == 1 and "JM901" in named.stdout


def test_stdin_with_paths_is_a_usage_error(files):
    assert jaxmigrate("a.py", "--stdin-filename", "x.py", input="").exit_code == 2


# --- cache and jobs ----------------------------------------------------------------------------


def test_no_cache_leaves_no_cache_folder(files):
    jaxmigrate(".", "--no-cache", "--output-format", "json")
    assert not (files / CACHE_DIR).exists()
    jaxmigrate(".", "--output-format", "json")
    assert (files / CACHE_DIR).is_dir()


def test_jobs_give_the_same_output(files):
    for i in range(MIN_FILES_FOR_POOL + 4):
        (files / f"m{i:03}.py").write_text(["x.legacy\n", "boom\n", "def f(:\nlegacy\n", "ok\n"][i % 4])
    serial = jaxmigrate(".", "--no-cache", "--jobs", "1", "--output-format", "json")
    pooled = jaxmigrate(".", "--no-cache", "--jobs", "3", "--output-format", "json")
    assert pooled.stdout == serial.stdout
    assert len(findings(serial.stdout)) > MIN_FILES_FOR_POOL // 2


@pytest.mark.parametrize(
    "handler, reported",
    [
        pytest.param("except ImportError:", False, id="except ImportError"),
        pytest.param("except (ImportError, AttributeError):", False, id="ImportError in a tuple"),
        pytest.param("except (AttributeError, ModuleNotFoundError):", False, id="ModuleNotFoundError last in a tuple"),
        pytest.param("except AttributeError:", True, id="another exception: the import is legacy use"),
    ],
)
def test_imports_in_an_import_error_fallback_are_left_alone(project, handler, reported):
    """Real rules: a compatibility fallback for old JAX is neither reported nor rewritten."""
    source = f"try:\n    from jax import shard_map\n{handler}\n    from jax.experimental.shard_map import shard_map\n"
    (project / "compat.py").write_text(source)
    checked = jaxmigrate("compat.py", "--no-cache", "--output-format", "json")
    assert bool(findings(checked.stdout)) == reported
    jaxmigrate("compat.py", "--no-cache", "--fix")
    assert ((project / "compat.py").read_text() == source) != reported


# --- the installed console script, on the real rules ------------------------------------------

LEGACY = textwrap.dedent(
    """\
    import jax
    from jax.experimental.pjit import pjit


    def step(x):
        return x


    p_step = jax.pmap(step, axis_name="i")
    g_step = pjit(step)
    mesh = jax.make_mesh((8,), ("data",))
    """
)


def console(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    script = shutil.which("jaxmigrate")
    assert script, "the jaxmigrate console script is not installed (pip install -e .)"
    return subprocess.run(
        [script, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_console_script_reports_legacy_pmap_and_pjit(tmp_path):
    (tmp_path / "legacy.py").write_text(LEGACY)
    (tmp_path / "modern.py").write_text("import jax\nf = jax.jit(lambda x: x)\n")
    result = console(".", "--output-format", "json", "--no-cache", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    codes = {(path, code) for path, code, _ in findings(result.stdout)}
    assert {("legacy.py", "JM101"), ("legacy.py", "JM201")} <= codes
    assert not any(path == "modern.py" for path, _ in codes)
    clean = console("modern.py", "--output-format", "json", cwd=tmp_path)
    assert clean.returncode == 0, clean.stderr


@pytest.fixture
def env_without_jax(tmp_path) -> dict:
    """An environment in which ``import jax`` fails, as on a machine without jax installed."""
    shadow = tmp_path / "shadow"
    (shadow / "jax").mkdir(parents=True)
    (shadow / "jax" / "__init__.py").write_text("raise ImportError('jax is not installed here')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(shadow), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    check = subprocess.run([sys.executable, "-c", "import jax"], env=env, capture_output=True)
    assert check.returncode != 0, "the shadow package failed to hide jax"
    return env


# Runs the CLI in-process and then reports whether anything imported jax.
NO_JAX_RUNNER = textwrap.dedent(
    """\
    import sys
    from jaxmigrate.cli import main
    try:
        main(sys.argv[1:])
    except SystemExit as exit:
        code = exit.code
    leaked = sorted(m for m in sys.modules if m == "jax" or m.startswith("jax."))
    print("JAX MODULES:", leaked, file=sys.stderr)
    sys.exit(code)
    """
)


@pytest.mark.parametrize(
    "jobs", [pytest.param("1", id="one process"), pytest.param("2", id="process pool")]
)
def test_lint_and_fix_work_where_jax_is_not_installed(tmp_path, env_without_jax, jobs):
    work = tmp_path / "work"
    work.mkdir()
    count = MIN_FILES_FOR_POOL + 1 if jobs == "2" else 1
    for i in range(count):
        (work / f"legacy{i}.py").write_text(LEGACY)
    (work / "requirements.txt").write_text("jax==0.4.35\n")  # written for 0.4: JM506's fix is safe

    def run(*args):
        return subprocess.run(
            [sys.executable, "-c", NO_JAX_RUNNER, ".", "--jobs", jobs, "--output-format", "json", *args],
            cwd=work, env=env_without_jax, capture_output=True, text=True, timeout=300,
        )

    checked = run("--no-cache")
    assert checked.returncode == 1, checked.stderr
    assert "JAX MODULES: []" in checked.stderr
    assert {"JM101", "JM201"} <= {code for _, code, _ in findings(checked.stdout)}

    # JM506 (mesh-implicit-axis-types) has a safe fix, whatever the others offer.
    fixed = run("--fix")
    assert fixed.returncode in (0, 1), fixed.stderr
    assert "JAX MODULES: []" in fixed.stderr
    text = (work / f"legacy{count - 1}.py").read_text()
    assert "axis_types=" in text
    compile(text, "legacy.py", "exec")
    assert "JM506" not in {code for _, code, _ in findings(fixed.stdout)}


# The CLI in a process of its own, on the test-only rules of conftest.py.
TEST_RULES_RUNNER = textwrap.dedent(
    f"""\
    import sys
    sys.path.insert(0, {str(Path(__file__).parent)!r})
    from conftest import TEST_RULES
    from jaxmigrate.lint import registry
    registry.all_rules = lambda: TEST_RULES
    from jaxmigrate.cli import main
    main(sys.argv[1:])
    """
)


@pytest.mark.parametrize("args", [[], *(["--output-format", f] for f in FORMATS if f != "text"), ["--diff"]],
                         ids=["text", *(f for f in FORMATS if f != "text"), "diff"])
def test_output_into_a_closed_pipe_stops_quietly_with_0(tmp_path, args):
    """`jaxmigrate src/ | head -1`: no traceback, and exit 0 as ruff does (the reader chose to stop)."""
    for i in range(20):  # far more output than a pipe buffers (64 KiB), in every format
        (tmp_path / f"m{i:02}.py").write_text("import x\n" + "x.legacy\n" * 300)
    process = subprocess.Popen(
        [sys.executable, "-c", TEST_RULES_RUNNER, ".", "--no-cache", *args], cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert process.stdout.read(10)
    process.stdout.close()  # what `head` does once it has its line
    err = process.stderr.read().decode()
    assert process.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err


# --- interruption -------------------------------------------------------------------------------

# The CLI on the real rules, held midway: each process (the run, or each pool worker) fixes its
# first file at once and waits at the gate before the next, so a test can act while the run is
# provably unfinished - no sleep that a loaded machine could outrun.
#
# SIGINT is first given Python's own handler, as a program started at a terminal has it. Without
# that the test depended on how pytest was started: a command run with `&` from a script (no job
# control) starts with SIGINT ignored, its children inherit that over exec, Python then keeps it
# ignored - rightly: a background job is not Ctrl-C's to stop - and the run ended with 0.
SLOW_RUNNER = textwrap.dedent(
    """\
    import os, signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from jaxmigrate import engine
    real = engine.process_text
    started = 0
    def held(*args):
        global started
        started += 1
        while started > 1 and not os.path.exists(os.environ["GATE"]):
            time.sleep(0.01)
        return real(*args)
    engine.process_text = held
    from jaxmigrate.cli import main
    main(sys.argv[1:])
    """
)


def slow_run(tmp_path: Path, *args: str, runner: str = SLOW_RUNNER, files: int = 40) -> tuple[subprocess.Popen, Path]:
    """The run, held at the gate (open it with ``open_gate``), and its folder; its stderr goes to
    a file (a pipe would wait for orphans)."""
    work = tmp_path / "work"
    work.mkdir()
    for i in range(files):
        (work / f"m{i:03}.py").write_text("import jax\ny = jax.tree_map(f, x)\n")
    with open(tmp_path / "stderr", "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-c", runner, ".", "--no-cache", "--fix", *args], cwd=work,
            stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
            env={**os.environ, "GATE": str(tmp_path / "gate")},
        )
    return process, work


def open_gate(tmp_path: Path) -> None:
    (tmp_path / "gate").touch()


def fixed_files(work: Path) -> set[str]:
    return {p.name for p in work.glob("m*.py") if "tree.map" in p.read_text()}


def wait_until(condition, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def processes(field: int, value: int) -> set[int]:
    """Running processes whose /proc stat field (after the name: 1 parent, 2 process group) is ``value``."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[field]) == value and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


def children_of(pid: int) -> set[int]:
    return processes(1, pid)


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's reaping is left


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_pool_workers_die_with_a_killed_parent_and_stop_rewriting(tmp_path):
    process, work = slow_run(tmp_path, "--jobs", "2")
    workers: set[int] = set()
    try:
        wait_until(lambda: fixed_files(work))
        workers = children_of(process.pid)
        assert len(workers) == 2
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        open_gate(tmp_path)  # a worker that outlived its parent would now go on rewriting
        wait_until(lambda: not any(running(pid) for pid in workers), timeout=5)
        done = fixed_files(work)
        time.sleep(1)
        assert fixed_files(work) == done and len(done) < 40  # nothing rewritten after the parent died
    finally:
        for pid in [process.pid, *workers]:  # never leave a test's processes behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def held_run(tmp_path: Path, *args: str, runner: str = SLOW_RUNNER, files: int = 40) -> Iterator[tuple[subprocess.Popen, Path]]:
    """``slow_run``, its processes killed at the end whatever happened (held, they never end)."""
    process, work = slow_run(tmp_path, *args, runner=runner, files=files)
    try:
        yield process, work
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def interrupted(tmp_path: Path, process: subprocess.Popen) -> str:
    """Ctrl-C to the held run (it reaches the whole foreground process group, workers included),
    then the gate opened, for the pool's workers to finish the files they hold; its stderr."""
    os.killpg(process.pid, signal.SIGINT)
    open_gate(tmp_path)
    process.wait(timeout=60)
    if sys.platform.startswith("linux"):
        wait_until(lambda: not processes(2, process.pid), timeout=10)  # the workers are gone too
    return (tmp_path / "stderr").read_text()


def assert_whole_files(work: Path) -> None:
    for path in work.glob("m*.py"):  # each file either fixed or untouched, never half-written
        assert path.read_text() in ("import jax\ny = jax.tree_map(f, x)\n", "import jax\ny = jax.tree.map(f, x)\n")
    assert [p.name for p in work.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("jobs", ["1", "2"], ids=["serial", "pool"])
def test_ctrl_c_exits_130_quietly_and_leaves_whole_files(tmp_path, jobs):
    with held_run(tmp_path, "--jobs", jobs) as (process, work):
        wait_until(lambda: fixed_files(work))
        assert process.poll() is None  # midway, and held there: the rest waits at the gate
        err = interrupted(tmp_path, process)
    assert process.returncode == 130, err
    assert err.splitlines()[-1] == "jaxmigrate: interrupted"
    assert_whole_files(work)
    if jobs == "1":
        assert len(fixed_files(work)) == 1  # stopped where it was: the file it was on is left as it was
    assert written_before_the_interruption(err) == fixed_files(work)


def written_before_the_interruption(err: str) -> set[str]:
    """The files an interrupted --fix says it had rewritten."""
    lines = err.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Fixed and written before the interruption")), None)
    return set() if start is None else {line.strip() for line in lines[start + 1 : -1]}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="a pool needs two cores")
def test_ctrl_c_stops_each_pool_worker_after_its_file_not_after_its_chunk(tmp_path):
    """A worker takes a chunk of files (here 320 files: 20 each); after a Ctrl-C it used to fix the
    rest of its chunk before the run could stop. Now it stops after the file it is on."""
    with held_run(tmp_path, "--jobs", "2", files=320) as (process, work):
        wait_until(lambda: len(fixed_files(work)) >= 2)  # each worker: its first file, then held at the gate
        err = interrupted(tmp_path, process)
    assert process.returncode == 130, err
    fixed = fixed_files(work)
    assert 2 <= len(fixed) <= 4  # the first file of each, and the one each was held on
    assert written_before_the_interruption(err) == fixed


# A pool whose workers are slow to start, as on a loaded machine: each waits at the gate before
# the pool's own set-up of a worker (which makes it leave Ctrl-C to the run) has run.
STARTING_RUNNER = SLOW_RUNNER.replace("from jaxmigrate.cli import main", textwrap.dedent(
    """\
    from jaxmigrate import workers
    set_up = workers._started_as_worker
    def slow_start(*args):
        while not os.path.exists(os.environ["GATE"]):
            time.sleep(0.01)
        set_up(*args)
    workers._started_as_worker = slow_start
    from jaxmigrate.cli import main"""
))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="a pool needs two cores")
def test_ctrl_c_while_the_pool_starts_exits_130_quietly(tmp_path):
    """A worker forked but not yet set up had Python's Ctrl-C handler, copied from the run: it died
    with a KeyboardInterrupt traceback ("Exception in initializer"). It now holds Ctrl-C until it
    ignores it."""
    with held_run(tmp_path, "--jobs", "2", runner=STARTING_RUNNER) as (process, work):
        wait_until(lambda: len(children_of(process.pid)) == 2)  # both forked; neither set up (the gate)
        err = interrupted(tmp_path, process)
    assert process.returncode == 130, err
    assert err.strip() == "jaxmigrate: interrupted"
    assert_whole_files(work)


@pytest.mark.parametrize("args", [["."], ["a.py", "--fix"]], ids=["check of a folder", "fix of a named file"])
def test_the_next_run_removes_the_temp_file_an_interrupted_run_left(files, args):
    (files / "sub").mkdir()
    left = [files / ".a.py.4194305.k2j3h4g5.jaxmigrate", files / "sub" / ".s.py.4194305.abcdefgh.jaxmigrate"]
    for path in left:
        path.write_text("import x\nx.mod")
    (files / "sub" / "s.py").write_text("ok = 1\n")
    jaxmigrate(*args)
    assert not left[0].exists()
    assert left[1].exists() == (args != ["."])  # only the folders of this run's files are looked at


# --- progress ----------------------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _progress_shown(stream, output_format: str, seconds: float, files: int = 250) -> str:
    """What stderr got from a run of ``files`` files that lasted ``seconds`` (or until the bar showed)."""
    from jaxmigrate import runner

    err = stream()
    with runner._progress(err, output_format) as tick:
        deadline = time.monotonic() + seconds
        while tick and time.monotonic() < deadline and "checking" not in err.getvalue():
            time.sleep(0.01)
        for _ in range(files if tick else 0):
            tick(1, files)
    return err.getvalue()


@pytest.mark.parametrize(
    "stream, output_format, shown",
    [
        pytest.param(Terminal, "text", True, id="terminal: shown"),
        pytest.param(io.StringIO, "text", False, id="not a terminal: not shown"),
        pytest.param(Terminal, "json", False, id="machine-readable output: not shown"),
    ],
)
def test_a_progress_bar_once_a_run_a_person_watches_takes_a_while(monkeypatch, stream, output_format, shown):
    from jaxmigrate import runner

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(runner, "PROGRESS_AFTER_SECONDS", 0.05)
    assert ("checking" in _progress_shown(stream, output_format, seconds=10)) == shown


@pytest.mark.parametrize("args, verb", [([], "checking"), (["--fix"], "fixing"), (["--diff"], "diffing")])
def test_the_progress_bar_says_what_the_run_does(files, monkeypatch, args, verb):
    from jaxmigrate import runner

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(runner, "PROGRESS_AFTER_SECONDS", 0)
    err = Terminal()
    real = engine.process_file

    def shown_first(*item):  # the run waits (a bounded while) for the bar to show
        deadline = time.monotonic() + 10
        while not err.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        return real(*item)

    monkeypatch.setattr(engine, "process_file", shown_first)
    runner.check(runner.CheckOptions(paths=[Path("a.py")], use_cache=False, jobs=1, **{a[2:]: True for a in args}),
                 stdout=io.StringIO(), stderr=err)
    assert verb in err.getvalue() and ({"checking", "fixing", "diffing"} - {verb}).isdisjoint(err.getvalue().split())


def test_no_progress_bar_for_a_run_quicker_than_that(monkeypatch):
    from jaxmigrate import runner

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(runner, "PROGRESS_AFTER_SECONDS", 60)
    assert _progress_shown(Terminal, "text", seconds=0.2) == ""


def test_no_progress_bar_when_quiet(monkeypatch):
    from jaxmigrate import runner

    monkeypatch.delenv("CI", raising=False)
    err = Terminal()
    with runner._progress(err, "text", quiet=True) as tick:
        assert tick is None
    assert err.getvalue() == ""


# --- rules and explain -------------------------------------------------------------------------


def test_rules_table_and_json_list_the_same_codes(test_rules):
    from jaxmigrate.lint import registry

    expected = [*registry.TOOL_CODES, *(rule.code for rule in test_rules)]
    listed = json.loads(jaxmigrate("rules", "--output-format", "json").stdout)
    assert [item["code"] for item in listed] == expected
    assert all(set(item) == {"code", "name", "summary", "fix", "fix_safeties", "jax_versions", "explanation"} for item in listed)
    table = jaxmigrate("rules").stdout
    assert all(code in table for code in expected)


def test_rules_piped_prints_every_summary_whole_one_rule_a_line():
    """No terminal, no width to fit: `jaxmigrate rules | grep JM5` must see whole rows."""
    from jaxmigrate.lint import registry

    lines = jaxmigrate("rules").stdout.splitlines()
    for rule in registry.all_rules():
        [row] = [line for line in lines if f" {rule.code} " in line]
        assert rule.name in row and rule.summary in row
    assert "…" not in "\n".join(lines)


def test_explain_prints_the_rules_sections_and_refuses_unknown_codes():
    from jaxmigrate.lint import registry

    code = next(rule.code for rule in registry.all_rules() if rule.jax_versions)  # JM002 has none: no JAX API
    text = jaxmigrate("explain", code.lower()).stdout
    for section in ("What it does", "Why is this bad", "Example", "Use instead", "Fix safety"):
        assert f"## {section}" in text
    assert "**JAX versions:**" in text and "**Fix:**" in text
    unknown = jaxmigrate("explain", "JM999")
    assert unknown.exit_code == 2 and "unknown rule" in unknown.stderr


@pytest.mark.parametrize("code", ["JM102", "JM302"])
def test_rules_and_explain_say_a_fix_may_be_unsafe_where_findings_can(code):
    listed = {r["code"]: r for r in json.loads(jaxmigrate("rules", "--output-format", "json").stdout)}
    assert (listed[code]["fix"], listed[code]["fix_safeties"]) == ("safe or unsafe", ["safe", "unsafe"])
    assert "**Fix:** safe or unsafe" in jaxmigrate("explain", code).stdout
    assert listed["JM301"]["fix"] == "unsafe" and listed["JM104"]["fix"] is None


# --- what is not a plain file in the project (issue 19) -------------------------------------------


@pytest.mark.parametrize("mode", ["check", "--fix"])
def test_a_fifo_named_as_a_file_is_skipped_with_a_message_not_waited_on(tmp_path, mode):
    # In a subprocess with a timeout: a regression hangs on reading the FIFO, and must fail, not hang.
    os.mkfifo(tmp_path / "x.py")
    (tmp_path / "a.py").write_text("import jax\nf = jax.pmap(g)\n")
    args = ["x.py", "a.py", "--no-cache", "--output-format", "json"] + ([mode] if mode == "--fix" else [])
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    result = subprocess.run([sys.executable, "-m", "jaxmigrate", *args], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    reported = json.loads(result.stdout)
    (fifo,) = [item for item in reported if item["path"] == "x.py"]
    assert fifo["code"] == "JM000" and "not a regular file (a FIFO)" in fifo["message"]
    assert ("a.py", "JM101") in {(item["path"], item["code"]) for item in reported}


def test_fix_does_not_write_through_a_symlink_to_a_file_outside_the_project(files, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere") / "shared.py"
    outside.write_text("import x\nx.legacy\n")
    (files / "link.py").symlink_to(outside)
    result = jaxmigrate("link.py", "--fix", "--no-cache", "--output-format", "json")
    assert outside.read_text() == "import x\nx.legacy\n"
    reported = json.loads(result.stdout)
    assert [item["code"] for item in reported] == ["JM000", "JM901"]
    assert "is a symlink to" in reported[0]["message"] and "outside the project" in reported[0]["message"]
    # A link to a file inside the project is fixed through (the file is the project's).
    (files / "inner.py").symlink_to(files / "a.py")
    assert jaxmigrate("inner.py", "--fix", "--no-cache").exit_code == 0
    assert (files / "a.py").read_text() == "import x\nx.modern\n"
