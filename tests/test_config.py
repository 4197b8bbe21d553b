"""[tool.jaxmigrate] in pyproject.toml (or --config), with command-line values on top."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxmigrate.config import DEFAULT_TARGET_JAX, ConfigError, find_config, load_settings


def write_pyproject(folder: Path, body: str) -> Path:
    path = folder / "pyproject.toml"
    path.write_text(body)
    return path


def test_without_a_config_every_rule_runs_on_the_default_target(project, test_rules):
    settings = load_settings(None, project)
    assert settings.config_file is None
    assert settings.root == project.resolve()
    assert settings.target_jax == DEFAULT_TARGET_JAX == (0, 10)
    assert settings.rule_codes_for(project / "a.py") == ("JM901", "JM902", "JM903", "JM904")


def test_select_ignore_and_target_are_read_from_pyproject(project, test_rules):
    write_pyproject(project, '[tool.jaxmigrate]\nselect = ["JM90"]\nignore = ["JM903"]\ntarget-jax = "0.8"\n')
    settings = load_settings(None, project)
    assert settings.target_jax == (0, 8)
    assert settings.rule_codes_for(project / "a.py") == ("JM901", "JM902", "JM904")


def test_the_nearest_pyproject_with_a_jaxmigrate_table_is_used(project, test_rules):
    write_pyproject(project, '[tool.jaxmigrate]\nselect = ["JM901"]\n')
    sub = project / "sub"
    sub.mkdir()
    write_pyproject(sub, '[tool.other]\nx = 1\n')  # no [tool.jaxmigrate]: keep looking up
    assert find_config(sub) == project / "pyproject.toml"
    assert load_settings(None, sub).root == project.resolve()


def test_command_line_values_override_the_config(project, test_rules):
    write_pyproject(project, '[tool.jaxmigrate]\nselect = ["JM901"]\ntarget-jax = "0.8"\n')
    settings = load_settings(None, project, select=["JM902"], target_jax="0.9")
    assert settings.rule_codes_for(project / "a.py") == ("JM902",)
    assert settings.target_jax == (0, 9)


def test_per_file_ignores_apply_to_matching_files_only(project, test_rules):
    write_pyproject(
        project,
        '[tool.jaxmigrate]\n[tool.jaxmigrate.per-file-ignores]\n"tests/*" = ["JM901", "JM902"]\n',
    )
    settings = load_settings(None, project)
    assert settings.rule_codes_for(project / "tests" / "t.py") == ("JM903", "JM904")
    assert settings.rule_codes_for(project / "src" / "t.py") == ("JM901", "JM902", "JM903", "JM904")


def test_a_dedicated_config_file_is_read_whole(project, test_rules):
    config = project / "jaxmigrate.toml"
    config.write_text('select = ["JM902"]\n')
    settings = load_settings(config, project)
    assert settings.rule_codes_for(project / "a.py") == ("JM902",)
    assert settings.root == project.resolve()


@pytest.mark.parametrize(
    "body, named",
    [
        pytest.param('[tool.jaxmigrate]\nselekt = ["JM901"]\n', "selekt", id="unknown key"),
        pytest.param('[tool.jaxmigrate]\nselect = ["JM999"]\n', "JM999", id="unknown code in select"),
        pytest.param('[tool.jaxmigrate]\nignore = ["XYZ1"]\n', "XYZ1", id="unknown code in ignore"),
        pytest.param(
            '[tool.jaxmigrate.per-file-ignores]\n"t/*" = ["JM777"]\n', "JM777",
            id="unknown code in per-file-ignores",
        ),
        pytest.param('[tool.jaxmigrate]\ntarget-jax = "latest"\n', "latest", id="malformed target"),
        pytest.param('[tool.jaxmigrate]\nselect = "JM901\n', "invalid TOML", id="invalid TOML"),
        pytest.param('[tool.jaxmigrate]\nexclude = 3\n', "exclude", id="wrong type"),
        # A TOML number: 0.10 is the float 0.1, which would silently mean JAX 0.1 and hide findings.
        pytest.param('[tool.jaxmigrate]\ntarget-jax = 0.10\n', 'a string like "0.10"', id="target as a float"),
        pytest.param('[tool.jaxmigrate]\ntarget-jax = 1\n', 'a string like "0.10"', id="target as an integer"),
        pytest.param('[tool]\njaxmigrate = 5\n', r"\[tool.jaxmigrate\] must be a table", id="table not a table"),
        pytest.param('[tool.jaxmigrate]\nper-file-ignores = 3\n', "per-file-ignores", id="per-file-ignores not a table"),
    ],
)
def test_bad_config_is_an_error_that_names_the_problem(project, test_rules, body, named):
    write_pyproject(project, body)
    with pytest.raises(ConfigError, match=named):
        load_settings(None, project)


def test_a_pyproject_that_is_not_utf8_is_an_error_naming_it(project, test_rules):
    (project / "pyproject.toml").write_bytes(b'[tool.jaxmigrate]\nselect = ["JM901"] # caf\xe9\n')
    with pytest.raises(ConfigError, match=r"pyproject.toml: .*UTF-8"):
        load_settings(None, project)


def test_a_pyproject_whose_tool_is_not_a_table_is_not_a_jaxmigrate_config(project, test_rules):
    # Not ours to judge while looking for the config: it has no [tool.jaxmigrate], so keep looking.
    write_pyproject(project, '[tool.jaxmigrate]\nselect = ["JM902"]\n')
    sub = project / "sub"
    sub.mkdir()
    write_pyproject(sub, 'tool = 3\n')
    assert find_config(sub) == project / "pyproject.toml"


def test_a_dedicated_config_file_must_hold_a_table(project, test_rules):
    config = project / "jaxmigrate.toml"
    config.write_text('tool = 3\n')
    with pytest.raises(ConfigError, match=r"jaxmigrate.toml: \[tool\] must be a table"):
        load_settings(config, project)


def test_unknown_code_on_the_command_line_is_an_error(project, test_rules):
    with pytest.raises(ConfigError, match="JM555"):
        load_settings(None, project, select=["JM555"])


def test_a_missing_config_file_is_an_error(project, test_rules):
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(project / "nope.toml", project)


def test_the_fingerprint_changes_when_the_tools_own_sources_do(project, test_rules, tmp_path, monkeypatch):
    # An edited rule in an editable install must not be answered from the cache: the version
    # number stays the same, the sources' sizes and mtimes do not.
    from jaxmigrate import config

    package = tmp_path / "pkg"
    (package / "rules").mkdir(parents=True)
    (package / "rules" / "rule.py").write_text("A = 1\n")
    (package / "symbols.toml").write_text("")
    first = config.tool_sources_digest.__wrapped__(package)
    (package / "rules" / "rule.py").write_text("A = 12\n")
    assert config.tool_sources_digest.__wrapped__(package) != first
    base = load_settings(None, project).fingerprint()
    monkeypatch.setattr(config, "tool_sources_digest", lambda: first)
    assert load_settings(None, project).fingerprint() != base


def test_the_fingerprint_changes_with_settings_that_change_findings(project, test_rules):
    base = load_settings(None, project).fingerprint()
    assert load_settings(None, project).fingerprint() == base
    assert load_settings(None, project, select=["JM901"]).fingerprint() != base
    assert load_settings(None, project, ignore=["JM901"]).fingerprint() != base
    assert load_settings(None, project, target_jax="0.8").fingerprint() != base


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"[tool.jaxmigrate]\ntarget-jax = 0.10\n", id="target as a float"),
        pytest.param(b"[tool]\njaxmigrate = 5\n", id="table not a table"),
        pytest.param(b'[tool.jaxmigrate]\nselect = ["JM901"] # caf\xe9\n', id="not UTF-8"),
    ],
)
def test_a_bad_config_is_exit_2_naming_the_file_never_an_internal_error(project, test_rules, body):
    from click.testing import CliRunner

    from jaxmigrate.cli import main

    (project / "a.py").write_text("import x\nx.legacy\n")
    (project / "pyproject.toml").write_bytes(body)
    result = CliRunner().invoke(main, ["a.py"], catch_exceptions=False)
    assert result.exit_code == 2
    assert "pyproject.toml" in result.stderr and "internal error" not in result.stderr


@pytest.mark.parametrize(
    ("pyproject", "given", "width"),
    [
        pytest.param("[tool.jaxmigrate]\nline-length = 100\n", None, 100, id="line-length"),
        pytest.param("[tool.jaxmigrate]\n\n[tool.ruff]\nline-length = 120\n", None, 120, id="ruff's"),
        pytest.param("[tool.black]\nline-length = 79\n", None, 79, id="black's, no jaxmigrate table"),
        pytest.param("[tool.jaxmigrate]\nline-length = 100\n", 80, 80, id="--line-length wins"),
        pytest.param("[tool.jaxmigrate]\n", None, None, id="none: each file's own width"),
    ],
)
def test_the_width_of_rewritten_lines_is_the_projects(project, test_rules, pyproject, given, width):
    (project / "pyproject.toml").write_text(pyproject)
    assert load_settings(None, project, line_length=given).line_length == width


@pytest.mark.parametrize("value", ["100", 10, 1000, 99.5])
def test_a_line_length_that_is_not_a_sane_whole_number_is_an_error(project, test_rules, value):
    (project / "pyproject.toml").write_text(f"[tool.jaxmigrate]\nline-length = {value!r}\n".replace("'", '"'))
    with pytest.raises(ConfigError, match="line-length must be a whole number"):
        load_settings(None, project)


@pytest.mark.parametrize(
    "body, options, named",
    [
        pytest.param("", {"target_jax": "0.3"}, "--target-jax: target-jax 0.3 is older than 0.4", id="--target-jax 0.3"),
        pytest.param('[tool.jaxmigrate]\ntarget-jax = "0.2"\n', {}, "pyproject.toml: target-jax 0.2", id="target-jax 0.2"),
        pytest.param("", {"from_jax": "1.5"}, "--from-jax: from-jax 1.5 is newer than target-jax 0.10", id="--from-jax 1.5"),
        pytest.param('[tool.jaxmigrate]\nfrom-jax = "0.9"\n', {"target_jax": "0.8"}, "pyproject.toml: from-jax 0.9 is newer",
                     id="from-jax newer than --target-jax"),
    ],
)
def test_versions_that_describe_no_migration_are_errors(project, test_rules, body, options, named):
    write_pyproject(project, body)
    with pytest.raises(ConfigError, match=named):
        load_settings(None, project, **options)


def test_a_project_pin_newer_than_the_target_is_not_the_users_error(project, test_rules):
    (project / "requirements.txt").write_text("jax>=0.9\n")
    assert load_settings(None, project, target_jax="0.8").from_jax == (0, 9)


@pytest.mark.parametrize("args", [["--from-jax", "1.5"], ["--target-jax", "0.3"]])
def test_a_backwards_migration_on_the_command_line_is_exit_2(project, test_rules, args):
    from click.testing import CliRunner

    from jaxmigrate.cli import main

    (project / "a.py").write_text("import x\nx.legacy\n")
    result = CliRunner().invoke(main, ["a.py", *args], catch_exceptions=False)
    assert result.exit_code == 2 and "jaxmigrate: error: --" in result.stderr


@pytest.mark.parametrize(
    ("select", "ignored", "expected"),
    [
        pytest.param(["JM901", "JM902"], ["JM901"], ("JM902",), id="same code, equal length: the ignore wins"),
        pytest.param(["JM90"], ["JM90"], (), id="same prefix, equal length: the ignore wins"),
        pytest.param(["JM901"], ["JM90"], ("JM901",), id="the longer select wins over a shorter ignore"),
        pytest.param(["JM90"], ["JM901"], ("JM902", "JM903", "JM904"), id="the longer ignore wins"),
    ],
)
def test_a_per_file_ignore_and_a_select_of_the_same_code(project, test_rules, select, ignored, expected):
    # As in ruff: the more specific selector wins; at equal length, the ignore does.
    write_pyproject(
        project,
        f'[tool.jaxmigrate]\nselect = {select!r}\n[tool.jaxmigrate.per-file-ignores]\n"tests/*" = {ignored!r}\n'.replace(
            "'", '"'),
    )
    settings = load_settings(None, project)
    assert settings.rule_codes_for(project / "tests" / "t.py") == expected
    assert set(settings.rule_codes_for(project / "src" / "t.py")) == {
        code for code in ("JM901", "JM902", "JM903", "JM904") if any(code.startswith(s) for s in select)}
