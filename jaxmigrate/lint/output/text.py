"""``--output-format text`` (the default): each finding with its source line and a caret, via rich.

    pkg/train.py:12:9 JM101 jax.pmap is deprecated ...
      12 | step = jax.pmap(update, axis_name="i")
         |        ^^^^^^^^
         [*] fix available (safe): rewrite as jax.jit over jax.shard_map

    1 finding, 1 fixable

Colour comes only from rich, which enables it when ``out`` is a terminal and honours ``NO_COLOR``
and ``FORCE_COLOR``; messages are rich ``Text``, never markup, so a ``[bold]`` in a message is
printed as written.
"""

from __future__ import annotations

from typing import TextIO

from rich.cells import cell_len
from rich.control import strip_control_codes
from rich.text import Text

from jaxmigrate.core.source import SourceText
from jaxmigrate.lint import registry
from jaxmigrate.lint.findings import Finding, Safety
from jaxmigrate.lint.output import Report
from jaxmigrate.lint.output.console import Console
from jaxmigrate.lint.output.summary import fix_applies, fixes_listing, summary_line
from jaxmigrate.notebooks import cell_source

TAB_SIZE = 4
LINES_PRINTED_TOGETHER = 400  # rich's cost is per print (terminal size, environment, ...)


def render(report: Report, out: TextIO) -> None:
    console = Console(
        file=out, highlight=False, soft_wrap=True, emoji=False, markup=False, tab_size=TAB_SIZE
    )
    # Without colour (a pipe, a CI log, NO_COLOR) rich would print exactly the text: write it
    # directly. Printing through rich line by line cost 0.35 ms a finding, most of the time of
    # checking a pmap-dense file; it now prints a few hundred lines at a time.
    plain = console.color_system is None
    sources: dict[tuple[str, int | None], SourceText | None] = {}
    batch: list[Text] = []
    for number, finding in enumerate(report.findings, 1):
        lines = [_headline(finding)]
        # A notebook finding counts lines within its cell: the source shown is the cell's.
        key = (finding.path, finding.cell)
        if key not in sources:
            text = report.read_source(finding.path)
            if text is not None and finding.cell is not None:
                text = cell_source(text, finding.cell)
            sources[key] = None if text is None else SourceText(text)
        source = sources[key]
        if source is not None and finding.line <= len(source.line_starts):
            lines += _snippet(finding, source.line(finding.line))
        if finding.fix is not None:
            lines.append(_fix_hint(finding, report))
        lines.append(Text())
        if plain:
            for line in lines:
                line.expand_tabs(TAB_SIZE)  # as rich does when it prints
            out.write("\n".join(line.plain for line in lines) + "\n")
            continue
        batch += lines
        if len(batch) >= LINES_PRINTED_TOGETHER or number == len(report.findings):
            console.print(Text("\n").join(batch))
            batch.clear()
    if not report.quiet:
        listing = fixes_listing(report)
        if listing and plain:
            out.writelines(line + "\n" for line in listing)
        elif listing:
            console.print(Text("\n".join(listing)))
        style = "bold red" if report.findings else "bold green"
        summary = Text(summary_line(report), style=style)
        if plain:
            out.write(summary.plain + "\n")
        else:
            console.print(summary)


def _color(finding: Finding) -> str:
    return "red" if finding.code in registry.TOOL_CODES else "yellow"


def _headline(finding: Finding) -> Text:
    return Text.assemble(
        (finding.location, "bold"),
        " ",
        (finding.code, f"bold {_color(finding)}"),
        " ",
        finding.message,
    )


def caret_line(line: str, finding: Finding) -> tuple[str, str]:
    """The source line as it will be shown, and the caret line under the finding's span.

    Columns count characters; the carets are placed by display cells, so a wide character
    (CJK, most emoji) before or inside the span moves them by two. Tabs are expanded first.
    """
    start = finding.column - 1
    if finding.end_line == finding.line:
        end = max(finding.end_column - 1, start + 1)
    else:
        end = max(len(line), start + 1)  # the span goes on below: underline to the line's end
    # Measure on exactly what rich will print: control codes stripped, tabs expanded.
    def cells(text: str) -> int:
        return cell_len(strip_control_codes(text.expandtabs(TAB_SIZE)))

    prefix = cells(line[:start])
    width = max(1, cells(line[:end]) - prefix)
    before = prefix + max(0, start - len(line))  # a column past the line's end (an EOF finding)
    shown = strip_control_codes(line.expandtabs(TAB_SIZE))
    return shown, " " * before + "^" * width


def _snippet(finding: Finding, line: str) -> list[Text]:
    shown, carets = caret_line(line, finding)
    number = str(finding.line)
    gutter = " " * len(number)
    return [
        Text.assemble((f"  {number} | ", "blue"), shown),
        Text.assemble((f"  {gutter} | ", "blue"), (carets, f"bold {_color(finding)}")),
    ]


def _fix_hint(finding: Finding, report: Report) -> Text:
    fix = finding.fix
    assert fix is not None
    if fix_applies(finding, report):
        fix = fix if report.unsafe_fixes else fix.allowed({Safety.SAFE})
        return Text.assemble(
            "  ", ("[*]", "bold green"), f" fix available ({fix.safety.value}): {fix.message}"
        )
    assert fix.safety is Safety.UNSAFE
    return Text(f"  unsafe fix available with --unsafe-fixes: {fix.message}", style="dim")
