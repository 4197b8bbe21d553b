"""The report as one self-contained HTML page: inline CSS, no script, no asset from anywhere.

Every text that comes from the code base (paths, messages quoting code, source lines) is
escaped where it is written, and the page forbids scripts and remote loads in its own Content
Security Policy as a second line of defence: a file named ``<img src=x onerror=alert(1)>.py`` is
shown as text. Charts are CSS bars; details open with ``<details>``, which needs no script.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import TextIO
from urllib.parse import quote

from jaxmigrate import __version__
from jaxmigrate.lint import registry
from jaxmigrate.lint.output.docs import explanation_markdown
from jaxmigrate.lint.output.summary import plural
from jaxmigrate.report.model import CATEGORIES, LABELS, Item, MigrationReport
from jaxmigrate.source_lines import SourceLines

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

STYLE = """
:root { --fixed:#2e7d32; --safe:#1565c0; --unsafe:#ef8f00; --left:#c62828; --suppressed:#9e9e9e; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1180px;
       padding: 16px 24px 48px; color: #1d1d1f; background: #fff; }
h1 { font-size: 22px; margin: 8px 0 2px; } h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; }
.meta { color: #555; margin-bottom: 14px; }
.cards { display: flex; gap: 10px; flex-wrap: wrap; margin: 10px 0; }
.card { border: 1px solid #ddd; border-left: 6px solid; border-radius: 6px; padding: 6px 12px; min-width: 120px; }
.card b { display: block; font-size: 22px; }
.card.fixed { border-left-color: var(--fixed); } .card.safe { border-left-color: var(--safe); }
.card.unsafe { border-left-color: var(--unsafe); } .card.left { border-left-color: var(--left); }
.card.suppressed { border-left-color: var(--suppressed); }
.bar { display: flex; height: 14px; min-width: 160px; background: #f1f1f1; border-radius: 3px; overflow: hidden; }
.bar.big { height: 22px; margin: 8px 0 4px; }
.seg { display: block; height: 100%; }
.seg.fixed, .dot.fixed { background: var(--fixed); } .seg.safe, .dot.safe { background: var(--safe); }
.seg.unsafe, .dot.unsafe { background: var(--unsafe); } .seg.left, .dot.left { background: var(--left); }
.seg.suppressed, .dot.suppressed { background: var(--suppressed); }
.legend span { margin-right: 14px; white-space: nowrap; }
.dot { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #eee; vertical-align: top; }
th { background: #fafafa; font-weight: 600; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12.5px; }
td code { background: #f6f8fa; padding: 1px 4px; border-radius: 3px; white-space: pre-wrap; word-break: break-word; }
.badge { display: inline-block; padding: 1px 7px; border-radius: 10px; color: #fff; font-size: 12px; white-space: nowrap; }
.badge.fixed { background: var(--fixed); } .badge.safe, .badge.exact { background: var(--safe); }
.badge.unsafe { background: var(--unsafe); } .badge.left, .badge.kept { background: var(--left); }
.badge.suppressed { background: var(--suppressed); } .badge.global-view { background: var(--fixed); }
.msg { color: #333; } .muted { color: #777; }
details { margin: 4px 0; } summary { cursor: pointer; }
.doc { border: 1px solid #e3e3e3; border-radius: 6px; padding: 2px 14px; margin: 10px 0; }
.doc pre { background: #f6f8fa; padding: 8px; overflow-x: auto; }
a { color: #0b57d0; text-decoration: none; } a:hover { text-decoration: underline; }
"""


def e(value) -> str:
    return html.escape(str(value), quote=True)


def render(report: MigrationReport, out: TextIO, *, sources: SourceLines) -> None:
    totals = report.totals()
    out.write("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
    out.write(f'<meta http-equiv="Content-Security-Policy" content="{e(CSP)}">\n')
    out.write('<meta name="viewport" content="width=device-width, initial-scale=1">\n')
    out.write(f"<title>jaxmigrate report: {e(', '.join(report.paths))}</title>\n<style>{STYLE}</style></head><body>\n")
    out.write(f"<h1>JAX migration report: {e(', '.join(report.paths))}</h1>\n")
    out.write(f'<div class="meta">{plural(report.files_checked, "file")} checked on {e(report.generated)}'
              f" by jaxmigrate {e(__version__)}</div>\n")
    out.write('<section id="totals"><div class="cards">')
    for name in CATEGORIES:
        out.write(f'<div class="card {name}" id="total-{name}"><b>{totals[name]}</b> {e(LABELS[name])}</div>')
    out.write("</div>\n" + _bar(totals, big=True) + _legend() + "</section>\n")
    _progress(report, out)
    _baseline(report, out)
    _table(out, "by-rule", "By rule", "rule", report.by_rule(), lambda code: _rule_cell(code))
    _table(out, "by-folder", "By folder", "folder", report.by_folder(), lambda folder: f"<code>{e(folder)}/</code>")
    _pmap_steps(report, out, sources)
    _reasons(report, out)
    _findings(report, out)
    _docs(report, out)
    out.write("</body></html>\n")


def _bar(row: dict[str, int], big: bool = False, scale: int | None = None) -> str:
    """A stacked bar of the row's categories; with ``scale`` (the largest row's total), bars of a
    table are as long as their totals are large."""
    total = sum(row.values())
    scale = max(scale or total, 1)
    segments = "".join(
        f'<span class="seg {name}" style="width:{100 * row[name] / scale:.3f}%" title="{e(LABELS[name])}: {row[name]}"></span>'
        for name in CATEGORIES if row[name]
    )
    return f'<div class="bar{" big" if big else ""}" role="img" aria-label="{e(_bar_label(row))}">{segments}</div>'


def _bar_label(row: dict[str, int]) -> str:
    return ", ".join(f"{row[name]} {LABELS[name]}" for name in CATEGORIES)


def _legend() -> str:
    return '<div class="legend">' + "".join(
        f'<span><i class="dot {name}"></i>{e(LABELS[name])}</span>' for name in CATEGORIES) + "</div>"


def _progress(report: MigrationReport, out: TextIO) -> None:
    out.write('<section id="progress"><h2>Progress</h2>')
    progress = report.progress
    if progress is None:
        out.write("<p>The first report written to this folder: the next one will show the progress since this one.</p>")
        out.write("</section>\n")
        return
    fixed, new = sum(progress.fixed.values()), sum(progress.new.values())
    out.write(f"<p>Since the last report ({e(progress.previous)}): <b>{fixed} fixed</b>, {new} new.</p>")
    if progress.fixed:
        out.write(f"<details><summary>What was fixed ({fixed})</summary><table><tr><th>rule</th><th>file</th>"
                  "<th>code</th><th class=\"n\">count</th></tr>")
        for entry, count in sorted(progress.fixed.items()):
            out.write(f"<tr><td>{_rule_link(entry.code)}</td><td>{e(entry.path)}</td>"
                      f"<td><code>{e(entry.source)}</code></td><td class=\"n\">{count}</td></tr>")
        out.write("</table></details>")
    out.write("</section>\n")


def _baseline(report: MigrationReport, out: TextIO) -> None:
    state = report.baseline
    if state is None:
        return
    held, stale = sum(map(report.baselined, report.items)), sum(state.stale.values())
    out.write(f'<section id="baseline"><h2>Baseline</h2><p><code>{e(state.file)}</code> holds {held} of these'
              f" findings; {stale} of its entries match no finding (stale: <code>--write-baseline"
              f" {e(state.file)}</code> drops them).</p>")
    if stale:
        out.write(f"<details><summary>Stale entries ({stale})</summary><table><tr><th>rule</th><th>file</th>"
                  '<th>code</th><th class="n">count</th></tr>')
        for entry, count in sorted(state.stale.items()):
            out.write(f"<tr><td>{_rule_link(entry.code)}</td><td>{e(entry.path)}</td>"
                      f'<td><code>{e(entry.source)}</code></td><td class="n">{count}</td></tr>')
        out.write("</table></details>")
    out.write("</section>\n")


def _table(out: TextIO, anchor: str, title: str, what: str, rows: dict[str, dict[str, int]], label) -> None:
    out.write(f'<section id="{anchor}"><h2>{e(title)}</h2><table><tr><th>{e(what)}</th><th>chart</th>')
    out.write("".join(f'<th class="n">{e(LABELS[name])}</th>' for name in CATEGORIES) + "</tr>\n")
    scale = max((sum(row.values()) for row in rows.values()), default=0)
    for key, row in rows.items():
        cells = "".join(f'<td class="n">{row[name]}</td>' for name in CATEGORIES)
        out.write(f"<tr><td>{label(key)}</td><td>{_bar(row, scale=scale)}</td>{cells}</tr>\n")
    if not rows:
        out.write('<tr><td colspan="7" class="muted">nothing to report</td></tr>')
    out.write("</table></section>\n")


def _rule_cell(code: str) -> str:
    rule = registry.rule_by_code(code)
    name = f" {e(rule.name)}" if rule else ""
    return f"{_rule_link(code)}{name}"


def _rule_link(code: str) -> str:
    return f'<a href="#rule-{e(code)}">{e(code)}</a>'


def _location(item: Item) -> str:
    """The finding's place, linking to the file (relative to the report) and, for an editor that
    takes such links, to its line."""
    finding = item.finding
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    shown = f"{item.path}:{cell}{finding.line}:{finding.column}"
    absolute = Path(item.path).absolute().as_posix()
    editor = f"vscode://file{quote(absolute)}:{finding.line}:{finding.column}"
    return (f'<a href="{e(quote(item.key.path))}">{e(shown)}</a> '
            f'<a class="muted" href="{e(editor)}" title="open at this line in an editor">&#8599;</a>')


def _pmap_steps(report: MigrationReport, out: TextIO, sources: SourceLines) -> None:
    steps = report.pmap_steps(sources)
    out.write(f'<section id="pmap"><h2>pmap steps ({len(steps)})</h2>')
    out.write("<p class=\"muted\">The path each <code>jax.pmap</code> takes with <code>--fix --unsafe-fixes</code>:"
              " the <b>global view</b> (<code>jax.jit</code> over sharded global arrays), the <b>exact</b> rewrite"
              " (<code>jax.jit(jax.shard_map(jax.vmap(f)))</code>, device axis kept), or <b>kept</b> as it is;"
              " and what blocks the others.</p>")
    if not steps:
        out.write('<p class="muted">No pmap in the code checked.</p></section>\n')
        return
    out.write("<table><tr><th>where</th><th>code</th><th>path</th><th>what blocks the global view / the rewrite</th></tr>\n")
    for step in steps:
        blocks = "".join(
            f'<div><span class="muted">{e(block.blocker.scope)}:</span> '
            + e(block.where)
            + (f" <code>{e(block.source)}</code>" if block.source else "")
            + f"<br>{code_spans(block.blocker.reason)}</div>"
            for block in step.blocks
        ) or '<span class="muted">nothing</span>'
        route = step.route.replace(" ", "-")
        out.write(f"<tr><td>{_location(step.item)}</td><td><code>{e(step.item.source)}</code></td>"
                  f'<td><span class="badge {route}">{e(step.route)}</span></td><td>{blocks}</td></tr>\n')
    out.write("</table></section>\n")


def _reasons(report: MigrationReport, out: TextIO) -> None:
    groups = report.reasons()
    out.write(f'<section id="reasons"><h2>Why fixes are kept ({len(groups)} reasons)</h2>')
    if not groups:
        out.write('<p class="muted">No fix is kept.</p>')
    for group in groups:
        out.write(f'<details class="reason"><summary><b class="count">{len(group.items)}</b> &times; '
                  f'<span class="muted">{e(group.scope)}:</span> {code_spans(group.reason)}</summary><ul>')
        for item in group.items:
            out.write(f"<li>{_location(item)} {_rule_link(item.finding.code)}"
                      f" <code>{e(item.source)}</code></li>")
        out.write("</ul></details>\n")
    out.write("</section>\n")


def _findings(report: MigrationReport, out: TextIO) -> None:
    out.write(f'<section id="findings"><h2>Findings ({len(report.items)})</h2><table>'
              "<tr><th>where</th><th>rule</th><th>state</th><th>message</th></tr>\n")
    for item in report.items:
        out.write(f'<tr class="finding"><td>{_location(item)}</td>'
                  f"<td>{_rule_link(item.finding.code)}</td>"
                  f'<td><span class="badge {item.category}">{e(LABELS[item.category])}</span>'
                  + (' <span class="muted">baselined</span>' if report.baselined(item) else "") + "</td>"
                  f'<td><code>{e(item.source)}</code><div class="msg">{code_spans(item.finding.message)}</div></td></tr>\n')
    out.write("</table></section>\n")


def _docs(report: MigrationReport, out: TextIO) -> None:
    out.write('<section id="rules"><h2>Rules (<code>jaxmigrate explain</code>)</h2>')
    for code in report.rule_codes():
        rule = registry.rule_by_code(code)
        text = explanation_markdown(rule) if rule else f"# {code}\n\n{registry.TOOL_CODES.get(code, '')}\n"
        out.write(f'<details class="doc" id="rule-{e(code)}"><summary><b>{e(code)}</b>'
                  f' {e(rule.name if rule else "")}</summary>{markdown_to_html(text)}</details>\n')
    out.write("</section>\n")


_INLINE = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*|\[([^\]]+)\]\((https?://[^)\s]+)\)")


def markdown_to_html(text: str) -> str:
    """The little markdown the rules' docs use (headings, fenced code, paragraphs, lists, inline
    code, bold, links), every text escaped."""
    parts: list[str] = []
    lines = text.split("\n")
    i = 0
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            if all(line.lstrip().startswith("- ") for line in paragraph):
                parts.append("<ul>" + "".join(f"<li>{_inline(line.lstrip()[2:])}</li>" for line in paragraph) + "</ul>")
            else:
                parts.append(f"<p>{_inline(' '.join(paragraph))}</p>")
            paragraph.clear()

    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            flush()
            block = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                block.append(lines[i])
                i += 1
            parts.append(f"<pre>{e(chr(10).join(block))}</pre>")
        elif line.startswith("#"):
            flush()
            level = min(len(line) - len(line.lstrip("#")) + 2, 6)
            parts.append(f"<h{level}>{_inline(line.lstrip('#').strip())}</h{level}>")
        elif not line.strip():
            flush()
        else:
            paragraph.append(line.rstrip())
        i += 1
    flush()
    return "".join(parts)


_CODE_SPAN = re.compile(r"`([^`]+)`")


def code_spans(text: str) -> str:
    """A message (which quotes user code) escaped, its `code` in code spans and nothing else."""
    out, last = [], 0
    for match in _CODE_SPAN.finditer(text):
        out.append(e(text[last:match.start()]) + f"<code>{e(match.group(1))}</code>")
        last = match.end()
    return "".join(out) + e(text[last:])


def _inline(text: str) -> str:
    out, last = [], 0
    for match in _INLINE.finditer(text):
        out.append(e(text[last:match.start()]))
        code, bold, label, url = match.groups()
        if code is not None:
            out.append(f"<code>{e(code)}</code>")
        elif bold is not None:
            out.append(f"<b>{e(bold)}</b>")
        else:
            out.append(f'<a href="{e(url)}">{e(label)}</a>')
        last = match.end()
    out.append(e(text[last:]))
    return "".join(out)
