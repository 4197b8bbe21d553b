"""The `jaxmigrate` console script: a Ctrl-C while it is still starting exits 130, quietly."""

from __future__ import annotations

import sys

from jaxmigrate.__main__ import run


class Interrupted:
    """An import system in which the user presses Ctrl-C while jaxmigrate.cli is being imported."""

    def find_spec(self, name, path=None, target=None):
        if name == "jaxmigrate.cli":
            raise KeyboardInterrupt
        return None


def test_ctrl_c_while_the_cli_is_imported_exits_130_without_a_traceback(monkeypatch, capsys):
    monkeypatch.delitem(sys.modules, "jaxmigrate.cli", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Interrupted(), *sys.meta_path])
    try:
        run()
    except SystemExit as exit:
        code = exit.code
    except KeyboardInterrupt:  # caught here, so a regression fails this test, not the whole run
        code = "a KeyboardInterrupt traceback"
    assert code == 130
    assert capsys.readouterr().err == ""


def test_the_installed_command_is_this_entry_point():
    from importlib.metadata import entry_points

    (command,) = [e for e in entry_points(group="console_scripts") if e.name == "jaxmigrate"]
    assert command.value == "jaxmigrate.__main__:run"
