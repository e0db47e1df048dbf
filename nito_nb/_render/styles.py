"""Styles of the rendered outputs: inline CSS, status colours, the code stylesheet and the
Pygments token kinds it colours (pure data).

Inline styles on our containers use JupyterLab's theme variables, with fallbacks that read on both
light and dark backgrounds (semi-transparent greys), so one output suits both themes.
"""

from __future__ import annotations

from typing import Any

from pygments import token as _tokens

from .._core.status import Status

_STATUS_COLORS: dict[str, str] = {
    Status.WAITING: "var(--jp-ui-font-color2, #888)",
    Status.STREAMING: "var(--jp-brand-color1, #2196f3)",
    Status.DONE: "var(--jp-success-color1, #2e7d32)",
    Status.ERROR: "var(--jp-error-color1, #d32f2f)",
    Status.TRUNCATED: "var(--jp-warn-color1, #ef6c00)",
    Status.STOPPED: "var(--jp-warn-color1, #ef6c00)",
    Status.FAILED: "var(--jp-error-color1, #d32f2f)",
}

_STATUS_STYLE = (
    "font-family: var(--jp-ui-font-family, system-ui, sans-serif);"
    " font-size: var(--jp-ui-font-size1, 13px); color: var(--jp-ui-font-color2, #888);"
)
_PROGRESS_STYLE = _STATUS_STYLE + " margin-top: 4px;"
_PRE_STYLE = (
    "white-space: pre-wrap; overflow-wrap: anywhere; margin: 0;"
    " font-family: var(--jp-code-font-family, monospace); font-size: var(--jp-code-font-size, 13px);"
)
_MUTED_STYLE = "color: var(--jp-content-font-color2, #888);"
_CARD_STYLE = (
    "border: 1px solid var(--jp-border-color2, rgba(127,127,127,.35)); border-radius: 4px;"
    " padding: 4px 8px; margin: 2px 0;"
)
_ERROR_STYLE = (
    "border-left: 3px solid var(--jp-error-color1, #d32f2f); background: rgba(211,47,47,.1);"
    " padding: 4px 8px; margin: 2px 0;"
)
_WARN_STYLE = (
    "border-left: 3px solid var(--jp-warn-color1, #ef6c00); background: rgba(239,108,0,.1);"
    " padding: 4px 8px; margin: 2px 0;"
)
# A structured answer's field being written (docs/STRUCTURED.md): marked by a left rule in the
# theme's brand colour, which reads on light and dark backgrounds alike.
_WRITING_STYLE = "border-left: 3px solid var(--jp-brand-color1, #2196f3); padding-left: 4px;"
_FIELD_KEY_STYLE = (
    "text-align: left; vertical-align: top; padding: 1px 8px 1px 0; font-weight: 600;"
)
# JupyterLab's rendered-HTML tables align cells right: a value (a JSON block) reads from the left.
_FIELD_VALUE_STYLE = "text-align: left; vertical-align: top; padding: 1px 0;"

# Highlighting: Pygments lexes; we emit a span only for the token kinds we colour, with one-letter
# classes, merging neighbours (``_highlight_code``). Pygments' own HtmlFormatter wraps every token,
# names and punctuation included, which made a code-heavy answer's HTML much bigger than ours
# (bench/bench_display.py's answer; docs/BENCHMARKS.md). One stylesheet, scoped to our code
# blocks, maps the classes to JupyterLab's editor colours (so code follows the user's theme); it
# rides along only with the first highlighted block of an answer (CSS applies page-wide).
CODE_STYLESHEET = (
    "<style>"
    ".nito-out pre.nito-code{padding:6px 8px;border-radius:3px;overflow-x:auto;"
    "background:var(--jp-cell-editor-background,rgba(127,127,127,.1))}"
    ".nito-out pre.nito-code code{background:none;padding:0}"
    ".nito-code .k{color:var(--jp-mirror-editor-keyword-color,#a35ec9);font-weight:600}"
    ".nito-code .s{color:var(--jp-mirror-editor-string-color,#c2672b)}"
    ".nito-code .c{color:var(--jp-mirror-editor-comment-color,#7f8c8d);font-style:italic}"
    ".nito-code .m{color:var(--jp-mirror-editor-number-color,#2a9d6f)}"
    ".nito-code .o{color:var(--jp-mirror-editor-operator-color,#b05ba6)}"
    ".nito-code .b{color:var(--jp-mirror-editor-builtin-color,#2a8c8c)}"
    ".nito-code .f{color:var(--jp-mirror-editor-def-color,#3b78d8)}"
    ".nito-code .d{color:var(--jp-mirror-editor-meta-color,#b05ba6)}"
    ".nito-code .a{color:var(--jp-mirror-editor-attribute-color,#3b78d8)}"
    ".nito-code .gd{color:var(--jp-error-color1,#d32f2f)}"
    ".nito-code .gi{color:var(--jp-success-color1,#2e7d32)}"
    "</style>"
)
# Most specific first: Name.Builtin before Name, Comment before anything else.
_TOKEN_CLASSES = (
    (_tokens.Comment, "c"),
    (_tokens.Keyword, "k"),
    (_tokens.Literal.String, "s"),
    (_tokens.Literal.Number, "m"),
    (_tokens.Operator.Word, "k"),
    (_tokens.Operator, "o"),
    (_tokens.Name.Builtin, "b"),
    (_tokens.Name.Function, "f"),
    (_tokens.Name.Class, "f"),
    (_tokens.Name.Decorator, "d"),
    (_tokens.Name.Attribute, "a"),
    (_tokens.Name.Tag, "a"),
    (_tokens.Generic.Deleted, "gd"),
    (_tokens.Generic.Inserted, "gi"),
)


def _token_class(ttype: Any) -> str:
    for parent, css in _TOKEN_CLASSES:
        if ttype in parent:
            return css
    return ""


_HIGHLIGHT_MARK = '<pre class="nito-code nito-hl">'
