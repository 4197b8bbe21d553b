"""`jaxmigrate rules` and `jaxmigrate explain CODE`: documentation generated from the rule classes."""

from __future__ import annotations

import json
from typing import TextIO

from jaxmigrate.lint import registry
from jaxmigrate.lint.rule import Rule


def rule_record(rule: type[Rule]) -> dict:
    return {
        "code": rule.code,
        "name": rule.name,
        "summary": rule.summary,
        "fix": rule.fix_label() if rule.fixable else None,
        "fix_safeties": [safety.value for safety in rule.fix_safeties()],
        "jax_versions": rule.jax_versions,
        "explanation": rule.explanation(),
    }


def tool_code_record(code: str, description: str) -> dict:
    """JM000 / JM001, findings of the tool itself: listed like rules, so both formats agree."""
    return {"code": code, "name": "", "summary": description, "fix": None, "fix_safeties": [], "jax_versions": None,
            "explanation": description}


def render_rules(output_format: str, out: TextIO) -> None:
    rules = registry.all_rules()
    if output_format == "json":
        records = [tool_code_record(*item) for item in registry.TOOL_CODES.items()]
        out.write(json.dumps(records + [rule_record(r) for r in rules], indent=2) + "\n")
        return
    from jaxmigrate.lint.output.console import Console
    from rich.table import Table

    table = Table(title=f"jaxmigrate rules ({len(rules)})", title_justify="left")
    for column in ("code", "name", "summary", "fix"):
        table.add_column(column, no_wrap=column in ("code", "name"))
    for code, description in registry.TOOL_CODES.items():
        table.add_row(code, "", description, "")
    for rule in rules:
        table.add_row(rule.code, rule.name, rule.summary, rule.fix_label() if rule.fixable else "")
    # On a terminal, the table fits its width; piped (`| grep`, `| less -S`) there is no width to
    # fit, and a row cut or wrapped to rich's default 80 columns loses the summary's end.
    width = None if _isatty(out) else WIDTH_WHEN_PIPED
    Console(file=out, soft_wrap=False, width=width).print(table)


WIDTH_WHEN_PIPED = 1_000


def _isatty(out: TextIO) -> bool:
    return hasattr(out, "isatty") and out.isatty()


def explanation_markdown(rule: type[Rule]) -> str:
    header = f"# {rule.code} {rule.name}\n\n{rule.summary}\n"
    facts = []
    if rule.jax_versions:
        facts.append(f"**JAX versions:** {rule.jax_versions}")
    facts.append(f"**Fix:** {rule.fix_label()}")
    return header + "\n" + "  \n".join(facts) + "\n\n" + rule.explanation() + "\n"


def render_explanation(code: str, out: TextIO) -> bool:
    if code.upper() in registry.TOOL_CODES:
        out.write(f"# {code.upper()}\n\n{registry.TOOL_CODES[code.upper()]}\n")
        return True
    rule = registry.rule_by_code(code)
    if rule is None:
        return False
    text = explanation_markdown(rule)
    if out.isatty():
        from jaxmigrate.lint.output.console import Console
        from rich.markdown import Markdown

        Console(file=out).print(Markdown(text))
    else:
        out.write(text)
    return True
