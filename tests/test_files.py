"""Files in and out: discovery, decoding that keeps encoding/BOM/newlines, atomic writes."""

from __future__ import annotations

import codecs
import os
from pathlib import Path

import pytest

from jaxmigrate.files import (
    TEMP_FILE, Discovery, FileChanged, SourceError, decode, encode, fingerprint, read_source,
    remove_abandoned_temp_files, write_atomic,
)


def touch(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


def found(root: Path, *paths: Path, **kwargs) -> list[str]:
    discovery = Discovery(root, **kwargs)
    return sorted(p.relative_to(root).as_posix() for p in discovery.files(paths or [root]))


# --- discovery ---------------------------------------------------------------------------------


def test_directories_are_recursed_for_python_and_stub_files(tmp_path):
    touch(tmp_path, "a.py", "pkg/b.py", "pkg/deep/c.pyi", "notes.txt", "pkg/data.json")
    assert found(tmp_path) == ["a.py", "pkg/b.py", "pkg/deep/c.pyi"]


@pytest.mark.parametrize(
    "folder",
    [".git", ".venv", "venv", "build", "dist", "__pycache__", "node_modules", ".tox"],
)
def test_default_excludes_are_skipped(tmp_path, folder):
    touch(tmp_path, "kept.py", f"{folder}/skipped.py", f"sub/{folder}/skipped.py")
    assert found(tmp_path) == ["kept.py"]


def test_gitignore_is_respected(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("generated/\n*_pb2.py\n")
    touch(tmp_path, "kept.py", "generated/g.py", "api_pb2.py", "sub/other_pb2.py")
    assert found(tmp_path) == ["kept.py"]


def test_nested_gitignore_applies_below_its_folder_only(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("secret.py\n")
    touch(tmp_path, "secret.py", "sub/secret.py", "sub/deeper/secret.py", "sub/ok.py")
    assert found(tmp_path) == ["secret.py", "sub/ok.py"]


def test_gitignore_above_the_repository_top_is_not_used(tmp_path):
    (tmp_path / ".gitignore").write_text("*.py\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    touch(repo, "a.py")
    assert found(repo) == ["a.py"]


def test_config_exclude_and_extend_exclude(tmp_path):
    touch(tmp_path, "a.py", "gen/b.py", "legacy/c.py", "build/d.py")
    # `exclude` replaces the defaults; `extend-exclude` adds to them.
    assert found(tmp_path, exclude=["gen"]) == ["a.py", "build/d.py", "legacy/c.py"]
    assert found(tmp_path, extend_exclude=["legacy"]) == ["a.py", "gen/b.py"]


def test_explicit_files_are_checked_even_when_excluded(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    touch(tmp_path, "ignored.py", "build/x.py", "script")
    explicit = [tmp_path / "ignored.py", tmp_path / "build/x.py", tmp_path / "script"]
    assert found(tmp_path, *explicit) == ["build/x.py", "ignored.py", "script"]


def test_force_exclude_applies_excludes_to_explicit_files(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    touch(tmp_path, "ignored.py", "build/x.py", "ok.py")
    explicit = [tmp_path / "ignored.py", tmp_path / "build/x.py", tmp_path / "ok.py"]
    assert found(tmp_path, *explicit, force_exclude=True) == ["ok.py"]


@pytest.mark.parametrize(
    "setup",
    [
        pytest.param({".gitignore": "/vendor\n"}, id="named directory is gitignored"),
        pytest.param({".gitignore": "vendor/\n"}, id="named directory is gitignored (dir pattern)"),
        pytest.param({}, id="named directory is config-excluded"),
    ],
)
def test_a_named_directory_is_checked_even_inside_an_ignored_area(tmp_path, setup):
    # e.g. `jaxmigrate $(python -c 'import jax, os; print(os.path.dirname(jax.__file__))')`
    # where the interpreter lives in a git checkout (pyenv) whose .gitignore lists /versions.
    (tmp_path / ".git").mkdir()
    for name, text in setup.items():
        (tmp_path / name).write_text(text)
    touch(tmp_path, "vendor/lib/a.py", "vendor/lib/skip_pb2.py", "vendor/lib/build/b.py", "vendor/c.py")
    (tmp_path / "vendor" / ".gitignore").write_text("*_pb2.py\n")
    assert found(tmp_path, tmp_path / "vendor", extend_exclude=["vendor"]) == ["vendor/c.py", "vendor/lib/a.py"]
    assert found(tmp_path, tmp_path / "vendor" / "lib", extend_exclude=["vendor"]) == ["vendor/lib/a.py"]
    assert found(tmp_path, extend_exclude=["vendor"]) == []


def test_a_file_named_twice_is_checked_once(tmp_path):
    touch(tmp_path, "a.py")
    assert found(tmp_path, tmp_path, tmp_path / "a.py") == ["a.py"]


def test_a_file_and_links_to_it_are_checked_once_under_its_own_name(tmp_path):
    touch(tmp_path, "pkg/a.py")
    (tmp_path / "pkg" / "alias.py").symlink_to("a.py")
    (tmp_path / "z.py").symlink_to(tmp_path / "pkg" / "a.py")
    assert found(tmp_path, tmp_path) == ["pkg/a.py"]
    assert found(tmp_path, tmp_path / "z.py", tmp_path / "pkg") == ["pkg/a.py"]


def test_links_to_a_file_outside_the_run_are_checked_once(tmp_path):
    touch(tmp_path, "outside/o.py")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "b.py").symlink_to(tmp_path / "outside" / "o.py")
    (tmp_path / "in" / "c.py").symlink_to(tmp_path / "outside" / "o.py")
    assert found(tmp_path, tmp_path / "in") == ["in/b.py"]


# --- reading -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, encoding, text",
    [
        pytest.param(b"x = 1\n", "utf-8", "x = 1\n", id="plain utf-8"),
        pytest.param(codecs.BOM_UTF8 + b"x = 1\n", "utf-8-sig", "x = 1\n", id="BOM removed, kept as codec"),
        pytest.param(b"x = 1\r\ny = 2\r\n", "utf-8", "x = 1\r\ny = 2\r\n", id="CRLF kept"),
        pytest.param(b"x = 1\ry = 2\r", "utf-8", "x = 1\ry = 2\r", id="CR kept"),
        pytest.param(
            b"# -*- coding: latin-1 -*-\ns = '\xe9'\n", "iso-8859-1",
            "# -*- coding: latin-1 -*-\ns = '\u00e9'\n", id="latin-1 coding cookie",
        ),
    ],
)
def test_decoding_keeps_what_writing_back_needs(raw, encoding, text):
    source = decode(raw)
    assert (source.encoding, source.text) == (encoding, text)
    assert encode(source, source.text) == raw


@pytest.mark.parametrize(
    "raw, message",
    [
        pytest.param(b"s = '\xff\xfe'\n", "cannot decode", id="invalid utf-8"),
        pytest.param(b"# coding: klingon\nx = 1\n", "cannot decode", id="unknown codec in cookie"),
        pytest.param(codecs.BOM_UTF8 + b"# coding: latin-1\n", "cannot decode", id="BOM contradicts cookie"),
    ],
)
def test_undecodable_bytes_raise_a_source_error(raw, message):
    with pytest.raises(SourceError, match=message):
        decode(raw, "bad.py")


@pytest.mark.parametrize(
    "raw, line, column",
    [
        pytest.param(b"import x\ns = 'caf\xc3\xa9 \xff'\n", 2, 11, id="columns count characters"),
        pytest.param(b"\xff = 1\n", 1, 1, id="first byte"),
        pytest.param(b"# -*- coding: utf-8 -*-\n\n\nx = b'\xfe'\n", 4, 7, id="after a cookie"),
        pytest.param(codecs.BOM_UTF8 + b"import x\ny = '\xc3\xa9\xff'\n", 2, 7, id="after a BOM"),
        pytest.param(codecs.BOM_UTF8 + b"x = '\xff'\n", 1, 6, id="BOM line: the BOM is no column"),
    ],
)
def test_a_decoding_error_says_where(raw, line, column):
    # JM000 points at the bad byte, as Python's own "(unicode error)" does, not at 1:1.
    with pytest.raises(SourceError) as error:
        decode(raw, "bad.py")
    assert (error.value.line, error.value.column) == (line, column)
    assert f"(line {line}, column {column})" in str(error.value)


def test_reading_a_directory_is_a_source_error(tmp_path):
    (tmp_path / "x.py").mkdir()
    with pytest.raises(SourceError, match="cannot read"):
        read_source(tmp_path / "x.py")


def test_text_that_the_encoding_cannot_hold_is_refused():
    source = decode(b"# -*- coding: latin-1 -*-\nx = 1\n")
    with pytest.raises(SourceError, match="cannot be written back"):
        encode(source, "x = '\u2603'\n")


# --- writing -----------------------------------------------------------------------------------


def test_atomic_write_replaces_contents_and_keeps_the_mode(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(b"old\n")
    os.chmod(path, 0o751)
    write_atomic(path, b"new\n")
    assert path.read_bytes() == b"new\n"
    assert oct(path.stat().st_mode & 0o777) == oct(0o751)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]  # no temp file left behind


def test_atomic_write_through_a_symlink_keeps_the_link(tmp_path):
    target = tmp_path / "real.py"
    target.write_bytes(b"old\n")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    write_atomic(link, b"new\n")
    assert link.is_symlink()
    assert target.read_bytes() == b"new\n"


def test_a_failed_write_leaves_the_original_and_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "a.py"
    path.write_bytes(b"old\n")

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(path, b"new\n")
    assert path.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]


def test_an_atomic_write_of_a_file_changed_since_it_was_read_is_refused(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(b"edited\n")
    with pytest.raises(FileChanged):
        write_atomic(path, b"new\n", expected=fingerprint(b"old\n"))
    assert path.read_bytes() == b"edited\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]
    write_atomic(path, b"new\n", expected=fingerprint(b"edited\n"))
    assert path.read_bytes() == b"new\n"


def test_a_temp_file_left_by_a_dead_run_is_removed_and_nothing_else(tmp_path):
    dead = 4_194_305  # above the largest pid Linux hands out: no process has it
    left = tmp_path / f".a.py.{dead}.k2j3h4g5.jaxmigrate"
    running = tmp_path / f".a.py.{os.getpid()}.x7y8z9w0.jaxmigrate"  # a concurrent run's, in use
    for path in (tmp_path / "a.py", left, running, tmp_path / ".notes.jaxmigrate", tmp_path / f".b.{dead}.jaxmigrate"):
        path.write_text("x\n")
    remove_abandoned_temp_files([tmp_path, tmp_path / "missing"])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["a.py", running.name, ".notes.jaxmigrate", f".b.{dead}.jaxmigrate"]
    )


def test_an_atomic_write_names_its_temp_file_so_that_it_can_be_recognised(tmp_path, monkeypatch):
    path = tmp_path / "a.py"
    path.write_bytes(b"old\n")
    names = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (names.append(Path(src).name), real(src, dst)))
    write_atomic(path, b"new\n")
    [name] = names
    assert TEMP_FILE.fullmatch(name) and TEMP_FILE.fullmatch(name).group("pid") == str(os.getpid())


def test_an_atomic_write_is_on_disk_before_it_replaces_the_file(tmp_path, monkeypatch):
    """The temp file is fsynced before os.replace: a crash right after the replace must not
    leave an empty file where the user's code was."""
    path = tmp_path / "a.py"
    path.write_bytes(b"old\n")
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self/fd") else fd))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(src)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_atomic(path, b"new\n")
    assert [kind for kind, _ in events] == ["fsync", "replace"]
    if os.path.exists("/proc/self/fd"):
        assert events[0][1] == events[1][1]  # the temp file itself was synced, then moved in place
    assert path.read_bytes() == b"new\n"
