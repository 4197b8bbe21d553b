"""Checking is the hot path of every pre-commit and CI run: it plans fixes (to say what --fix will
do) with `ast` only, and never loads LibCST, which only writing a fix needs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_checking_every_fixture_imports_no_libcst():
    code = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from jaxmigrate.lint.checker import lint_text
        from jaxmigrate.lint.registry import all_rules
        rules = all_rules()
        fixable = set()
        for path in sorted(Path(sys.argv[1]).rglob("*.py")):
            text = path.read_text(encoding="utf-8", errors="replace")
            fixable |= {f.code for f in lint_text(text, path.name, rules, (0, 10)) if f.fix}
        print(" ".join(sorted(fixable)))
        print("libcst" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", code, str(FIXTURES)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    fixable, libcst_loaded = done.stdout.strip().splitlines()
    # The fixtures exercise the codemod-backed fixes, so their planners really ran.
    assert {"JM101", "JM102", "JM201", "JM301", "JM302", "JM305"} <= set(fixable.split()), fixable
    assert libcst_loaded == "False"
