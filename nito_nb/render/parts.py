"""Rendering: answer state -> safe output (pure: no I/O, no mutable globals).

Model text is data, never markup that runs. Every string the gateway controls (content, reasoning,
tool names and arguments, error messages, the model name, usage values, anomalies) reaches the HTML
either escaped, or through markdown-it with raw HTML off and only http(s)/mailto/relative links. We
emit ``text/html`` + ``text/plain`` and never ``text/markdown``: JupyterLab renders Markdown
outputs with their raw HTML live (see docs/JUPYTER.md), so it is not a safe sink.

The answer is split into blocks (``split_blocks``) so that a live display sends each finished block
once and re-sends only a small tail: traffic stays linear in the answer length.

Public pieces:

- ``markdown_to_html(text, *, highlight=True) -> str``
- ``split_blocks(text) -> (finished, tail)``
- ``Part(key, html, text, final)``; ``render_parts(state, *, format, live, cache) -> list[Part]``
- ``bundle(part) -> dict``; ``join_parts(parts) -> dict``; ``final_bundle(state, *, format) -> dict``
- ``status_text(state) -> str``: the one-line summary
- ``RenderCache``: optional memo a live caller passes to ``render_parts`` (results never depend on it)

``state`` is duck-typed like a Stream (docs/ENGINE_API.md): ``content, reasoning, refusal,
tool_calls, status, model, ttft, elapsed, n_chunks, finish_reason, usage, error, anomalies, done,
free_tier``; missing attributes count as empty.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from mdit_py_plugins.dollarmath import dollarmath_plugin
from pygments import token as _tokens
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from .._core import metrics
from .._core.status import RUNNING, Status

__all__ = [
    "FORMATS",
    "Part",
    "RenderCache",
    "bundle",
    "check_format",
    "final_bundle",
    "join_parts",
    "markdown_to_html",
    "render_parts",
    "split_blocks",
    "status_text",
]

FORMATS = ("markdown", "text", "code")

#: A block without a natural end (no blank line, no closed fence) is frozen at a line boundary once
#: it reaches this many characters, so a long paragraph-free answer never makes the live tail (which
#: is re-sent on every update) grow without bound.
FREEZE_CHARS = 4096
#: While streaming, long reasoning and tool arguments show only their last characters.
WINDOW_CHARS = 2048
_MAX_ANOMALIES_LISTED = 20
#: A growing answer longer than this (about a screen) shows a progress footer under its live tail.
PROGRESS_AFTER_CHARS = 3000
#: The status line shows a ``free_tier`` object in at most this many characters.
_FREE_TIER_CHARS = 160
_MAX_ERROR_CHARS = 4000

_RUNNING = RUNNING
_SYMBOLS: dict[str, str] = {
    Status.WAITING: "⏳",
    Status.STREAMING: "●",
    Status.DONE: "✓",
    Status.ERROR: "✗",
    Status.TRUNCATED: "⚠",
    Status.STOPPED: "■",
    Status.FAILED: "✗",
}
_STATUS_COLORS: dict[str, str] = {
    Status.WAITING: "var(--jp-ui-font-color2, #888)",
    Status.STREAMING: "var(--jp-brand-color1, #2196f3)",
    Status.DONE: "var(--jp-success-color1, #2e7d32)",
    Status.ERROR: "var(--jp-error-color1, #d32f2f)",
    Status.TRUNCATED: "var(--jp-warn-color1, #ef6c00)",
    Status.STOPPED: "var(--jp-warn-color1, #ef6c00)",
    Status.FAILED: "var(--jp-error-color1, #d32f2f)",
}

# --- styles -----------------------------------------------------------------------------------
# Inline styles on our containers use JupyterLab's theme variables, with fallbacks that read on
# both light and dark backgrounds (semi-transparent greys), so one output suits both themes.
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

# Highlighting: Pygments lexes; we emit a span only for the token kinds we colour, with one-letter
# classes, merging neighbours (``_highlight_code``). Pygments' own HtmlFormatter wraps every token,
# names and punctuation included, which made a code-heavy answer's HTML 2.2x bigger (measured on
# bench/bench_display.py's answer); ours adds about a third. One stylesheet, scoped to our code
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

# --- Markdown -----------------------------------------------------------------------------------

_SCHEME_RE = re.compile(r"^([a-z][a-z0-9+.\-]*):", re.IGNORECASE)
_SAFE_SCHEMES = frozenset({"http", "https", "mailto"})


def _validate_link(url: str) -> bool:
    """Allow http(s), mailto and scheme-less (relative, #anchor) links; drop everything else.

    markdown-it calls this on the normalized URL (entities decoded, control characters and spaces
    percent-encoded), so ``&#106;avascript:`` and ``java\\tscript:`` arrive here in plain sight.
    An allowlist, unlike markdown-it's default denylist, also refuses ``data:`` and unknown schemes.
    """
    match = _SCHEME_RE.match(url.strip())
    return match is None or match.group(1).lower() in _SAFE_SCHEMES


def _highlight_code(code: str, lang: str) -> str:
    """Pygments spans for a known language, else escaped text; wrapped in our own <pre>."""
    lexer = None
    if lang:
        try:
            lexer = get_lexer_by_name(lang, stripnl=False, ensurenl=False)
        except ClassNotFound:
            lexer = None
    if lexer is None:
        return f'<pre class="nito-code"><code>{html.escape(code, quote=False)}</code></pre>'
    out: list[str] = []
    run_class, run = "", list[str]()
    classes: dict[Any, str] = {}  # a block repeats few token types: look each up once
    for ttype, value in lexer.get_tokens(code):
        if not value.strip():
            css = run_class  # whitespace joins whatever run it is in
        elif ttype in classes:
            css = classes[ttype]
        else:
            css = classes[ttype] = _token_class(ttype)
        if css != run_class and run:
            out.append(_span(run_class, "".join(run)))
            run = []
        run_class = css
        run.append(value)
    if run:
        out.append(_span(run_class, "".join(run)))
    return f"{_HIGHLIGHT_MARK}<code>{''.join(out)}</code></pre>"


def _span(css: str, text: str) -> str:
    escaped = html.escape(text, quote=False)
    return f'<span class="{css}">{escaped}</span>' if css else escaped


def _fence_rule(highlight: bool) -> Any:
    def render_fence(
        self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
    ) -> str:
        token = tokens[idx]
        lang = token.info.strip().split(maxsplit=1)[0] if token.info.strip() else ""
        if not highlight:
            lang = ""
        return _highlight_code(token.content, lang) + "\n"

    return render_fence


def _render_code_block(
    self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return _highlight_code(tokens[idx].content, "") + "\n"


_LINK_ATTRS = ' rel="noopener noreferrer" target="_blank"'


def _render_link_open(
    self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    href = str(token.attrGet("href") or "")
    title = token.attrGet("title")
    title_attr = f' title="{html.escape(str(title))}"' if title else ""
    return f'<a href="{html.escape(href)}"{title_attr}{_LINK_ATTRS}>'


def _render_image(
    self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    # Images become links: a remote image in model output loads by itself, and a prompt-injected
    # answer can leak data through its URL (the "markdown image exfiltration" attack). A link only
    # goes out when the user clicks it.
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    label = html.escape(f"[image: {alt}]", quote=False)
    if not src:
        return label
    return f'<a href="{html.escape(src)}"{_LINK_ATTRS}>{label}</a>'


def _render_math_inline(
    self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    # Math stays text between its dollars: front ends that typeset (JupyterLab's MathJax) find it,
    # and the plugin keeps Markdown from eating ``*`` and ``\\`` inside it.
    return f'<span class="nito-math">${html.escape(tokens[idx].content, quote=False)}$</span>'


def _render_math_block(
    self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    content = html.escape(tokens[idx].content, quote=False)
    return f'<div class="nito-math">$${content}$$</div>\n'


def _make_markdown(highlight: bool, linkify: bool) -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "typographer": False, "linkify": linkify})
    md.enable(["table", "strikethrough"])
    if linkify:
        # Bare URLs with a scheme (and e-mail addresses) become links, checked by _validate_link
        # like any other; no scheme-less guesses ("setup.py" would link to the .py domain).
        md.enable("linkify")
        assert md.linkify is not None  # linkify-it-py, a dependency
        md.linkify.set({"fuzzy_link": False})
    # No blank lines, labels or digit-adjacent dollars: "$5 and $10" stays currency, and a math
    # block never spans a blank line (which split_blocks relies on).
    md.use(
        dollarmath_plugin,
        allow_labels=False,
        allow_space=True,
        allow_digits=False,
        allow_blank_lines=False,
        double_inline=False,
    )
    md.validateLink = _validate_link  # type: ignore[method-assign]
    md.add_render_rule("fence", _fence_rule(highlight))
    md.add_render_rule("code_block", _render_code_block)
    md.add_render_rule("link_open", _render_link_open)
    md.add_render_rule("image", _render_image)
    md.add_render_rule("math_inline", _render_math_inline)
    md.add_render_rule("math_block", _render_math_block)
    return md


# Configured once, never mutated afterwards; markdown-it keeps per-call state in ``env``. By
# (highlight, linkify): the linkify pass costs a fifth of the rendering time (measured on
# display_samples' answer), so it runs only on text that can hold a link at all.
_MD = {(h, lk): _make_markdown(h, lk) for h in (True, False) for lk in (True, False)}


def markdown_to_html(text: str, *, highlight: bool = True) -> str:
    """Markdown (CommonMark + GFM tables and strikethrough + ``$`` math as text) to safe HTML.

    Raw HTML in ``text`` comes out escaped, links (bare URLs with a scheme and e-mail addresses
    too) keep only http(s)/mailto/relative targets and open in a new tab with
    ``rel="noopener noreferrer"``, images become links, fenced code is highlighted with Pygments
    (``highlight=False``: escaped plain text). Partial Markdown (an
    unclosed fence, half a table) renders as CommonMark says: an open fence runs to the end.
    """
    linkable = "://" in text or "@" in text  # a URL with a scheme, or an e-mail address
    return _MD[highlight, linkable].render(text)


# --- splitting ------------------------------------------------------------------------------------

_FENCE_OPEN_RE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_LIST_ITEM_RE = re.compile(r"^(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)")
_SETEXT_RE = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
_MARKER_SO_FAR_RE = re.compile(r"[-+*]|\d{1,9}[.)]?")  # what _LIST_ITEM_RE needs one more character for


@dataclass(frozen=True)
class _Fence:
    char: str
    length: int
    indent: int  # columns before the opening run
    opener: str  # the opening line, re-prepended to render a block that starts inside this fence
    container: int = 0  # content column of the list item holding it (0: top level)

    def closes(self, line: str) -> bool:
        stripped = line.lstrip(" ")
        if not 0 <= len(line) - len(stripped) - self.container <= 3:
            return False
        run = len(stripped) - len(stripped.lstrip(self.char))
        return run >= self.length and not stripped[run:].strip()

    def ends_with(self, line: str) -> bool:
        """Does this non-blank line end the list item holding the fence (and so the fence)?"""
        return len(line) - len(line.lstrip(" ")) < self.container


def _fence_opening(line: str, item_column: int) -> _Fence | None:
    """The fence ``line`` opens, if any; ``item_column``: content column of an open list item."""
    body = line.lstrip(" ")
    indent = len(line) - len(body)
    container = item_column if item_column and indent >= item_column else 0
    match = _FENCE_OPEN_RE.match(line[container:])
    if match is None:
        return None
    _, run, info = match.groups()
    if run[0] == "`" and "`" in info:
        return None  # CommonMark: a backtick fence's info string has no backticks (inline code)
    return _Fence(run[0], len(run), indent, line.rstrip("\r"), container)


def _item_column(body: str, indent: int) -> int:
    """The content column of a list item line (``body`` starts with its marker), as CommonMark."""
    match = _LIST_ITEM_RE.match(body)
    if match is None:
        return 0
    marker = len(match.group(0).rstrip(" \t"))
    spaces = len(body[marker:]) - len(body[marker:].lstrip(" "))
    if spaces == 0 or spaces > 4 or not body[marker:].strip():
        spaces = 1  # no text, or indented code after the marker: content starts one space in
    return indent + marker + spaces


@dataclass(frozen=True)
class _Block:
    start: int
    end: int
    fence: _Fence | None  # a fence already open where this block starts (frozen code blocks)


class _Scan(NamedTuple):
    blocks: list[_Block]
    tail_start: int
    tail_fence: _Fence | None  # the fence open at tail_start
    # Where the text stops being sure of its block: the start of a last, unfinished line that
    # may still turn out to start a block of its own (else the end of the text).
    settled: int


def _starts_new_block(line: str, *, has_list: bool, has_quote: bool) -> bool:
    """After a blank line, does ``line`` surely start a block unrelated to the current one?

    The current block starts at top level (every cut is made there), so after a blank line only a
    list it holds can go on (a list item, or a line indented like an item's content) and only a
    quote it holds can (a ``>`` line, which would merge into it). A line indented 4+ columns might
    be either, or indented code: it never starts a block.
    """
    body = line.lstrip(" ")
    indent = len(line) - len(body)
    if not body or indent > 3 or body[0] == "\t":
        return False
    if body[0] == ">":
        return not has_quote
    if indent or _LIST_ITEM_RE.match(body):
        return not has_list
    return True  # a paragraph, heading, fence... at column 0 ends any list or quote


def _partial_starts_new_block(partial: str, *, has_list: bool, has_quote: bool) -> bool | None:
    """``_starts_new_block`` for a line of which only ``partial`` has arrived (no newline yet);
    None while the rest of the line could still change the answer."""
    body = partial.lstrip(" ")
    if not body.strip():
        return None  # nothing but blanks so far: the line may yet be blank
    if len(body) == len(partial) and _MARKER_SO_FAR_RE.fullmatch(body):
        return None  # "-", "12", "12.": a list marker or not, depending on the next character
    return _starts_new_block(partial, has_list=has_list, has_quote=has_quote)


def _safe_freeze_point(prev: str, line: str) -> bool:
    """Can an over-long block be cut just before ``line`` without changing what came before?

    Not before an indented line, a setext underline (it would turn the previous line into a
    heading), a quote line, or a table row following a table row.
    """
    if not line or line[0].isspace() or line[0] == ">" or _SETEXT_RE.match(line):
        return False
    return not ("|" in line and "|" in prev)


def _segment(
    text: str,
    *,
    markdown: bool,
    start: int = 0,
    fence: _Fence | None = None,
    limit: int = FREEZE_CHARS,
) -> _Scan:
    """Cut ``text[start:]`` into finished blocks.

    Complete lines (ending in ``\\n``) are looked at, left to right, and each cut depends on the
    lines before it and the line after it only (of an unfinished last line, only on characters
    that no later character can change); so a cut made for a prefix of a text is made again, at
    the same place, for every longer text (the stability ``split_blocks`` promises).
    ``start``/``fence`` resume a scan from a tail it returned: cuts only happen where the scanner
    state is just (position, open fence), so resuming gives the same blocks as a full scan.
    """
    blocks: list[_Block] = []
    block_start = start
    block_fence = fence  # the fence already open at block_start
    in_fence = fence
    has_content = False  # the current block holds a non-blank line
    has_list = has_quote = False  # ... a top-level list item / quote line (see _starts_new_block)
    item_column = 0  # content column of the last top-level list item of the block
    after_blank = False
    prev = ""
    pos = start
    while True:
        newline = text.find("\n", pos)
        if newline < 0:
            break
        line_start, pos = pos, newline + 1
        line = text[line_start:newline].rstrip("\r")

        if in_fence is not None and line.strip() and in_fence.ends_with(line):
            # A fence inside a list item ends with the item, closed or not (CommonMark).
            in_fence = None
        if in_fence is not None:
            if markdown and in_fence.closes(line):
                closed, in_fence = in_fence, None
                if closed.indent == 0 and closed.container == 0:
                    # A fence opened at column 0 closed: no later line can reach back into it
                    # (a column-0 fence is never inside a list item or a quote).
                    blocks.append(_Block(block_start, pos, block_fence))
                    block_start, block_fence, has_content = pos, None, False
                    has_list = has_quote = False
                    item_column = 0
                    after_blank, prev = False, line
                    continue
            elif line_start - block_start >= limit:
                blocks.append(_Block(block_start, line_start, block_fence))
                block_start, block_fence = line_start, in_fence
                has_list = has_quote = False
                item_column = 0
            # A blank line counts if the fence ends with its list item (see ends_with above).
            after_blank = not line.strip()
            has_content, prev = True, line
            continue

        if not line.strip():
            after_blank = after_blank or has_content
            prev = line
            continue

        if has_content:
            if not markdown:
                cut = after_blank or line_start - block_start >= limit
            elif after_blank and _starts_new_block(line, has_list=has_list, has_quote=has_quote):
                cut = True
            else:
                cut = line_start - block_start >= limit and _safe_freeze_point(prev, line)
            if cut:
                blocks.append(_Block(block_start, line_start, block_fence))
                block_start, block_fence = line_start, None
                has_list = has_quote = False
                item_column = 0
        after_blank, has_content, prev = False, True, line
        if markdown:
            body = line.lstrip(" ")
            indent = len(line) - len(body)
            if indent <= 3:
                has_quote = has_quote or body.startswith(">")
                column = _item_column(body, indent)
                if column:
                    has_list, item_column = True, column
                elif indent < item_column and body[:1] in ("#", ">"):
                    item_column = 0  # a heading or quote ends the list (a lazy line would not)

        if markdown:
            # Math blocks need no tracking: they never span a blank line (allow_blank_lines=False),
            # and whether ``$$`` opens one depends on lines still to come (no closing ``$$``, no
            # math block). A fence-like line inside a math block, or a freeze cut inside a math
            # block of more than FREEZE_CHARS, are the (rare) cases where a block renders apart.
            in_fence = _fence_opening(line, item_column)
            if in_fence is not None and not in_fence.container:
                item_column = 0  # a fence left of the item's content ends the list

    # The last line is still arriving. A live view shows it, so where a cut before it is possible
    # it must be decided before the line is shown: otherwise its start is shown at the end of the
    # block before, then moved to an output of its own when its newline comes, and JupyterLab
    # renders the two messages apart (measured: the paragraph vanishes for a frame, then returns).
    settled = len(text)
    if pos < len(text):
        partial = text[pos:]
        starts: bool | None = False
        if in_fence is None and has_content and after_blank:
            if markdown:
                starts = _partial_starts_new_block(partial, has_list=has_list, has_quote=has_quote)
            else:
                starts = bool(partial.strip()) or None
        elif in_fence is not None and in_fence.container and after_blank:
            starts = None  # the line may end the list item holding the fence, then start a block
        if starts is True:
            blocks.append(_Block(block_start, pos, block_fence))
            block_start, block_fence = pos, None
        elif starts is None or pos - block_start >= limit:  # past the limit: a freeze cut may come
            settled = pos
    return _Scan(blocks, block_start, block_fence, settled)


def split_blocks(text: str) -> tuple[list[str], str]:
    """Split Markdown into blocks that can no longer change, and the tail that still can.

    ``"".join(finished) + tail == text`` always, and a block finished for a text stays finished,
    identical, for every text that extends it. The rule, conservative on purpose:

    - a block ends before a non-blank line that follows a blank line outside a code fence, unless
      the block holds a list and that line is a list item or indented (a loose list may go on),
      or the block holds a quote and that line is a quote line, or the line is indented 4+ columns;
    - a block ends right after the closing line of a fence opened at column 0;
    - a block that reaches ``FREEZE_CHARS`` without ending is cut before its next line, if that is
      safe (not before an indented line, a setext underline, a quote line, or the next row of a
      table); inside a code fence it is cut before any line, and the rendering re-opens the fence
      for the next block (a long code block shows as several adjacent boxes). A single line longer
      than that (no newline at all) stays in the tail.

    A cut before a line is decided by the lines before it and that line: when it is complete, or
    as soon as its first characters decide it (a paragraph after a blank line starts a block at its
    first letter; a list marker, at the character after it). Decided early, the live view never shows
    the start of a block inside the one before it.
    Rendering the blocks one by one gives the HTML of the whole text (tested on typical model
    Markdown), except: a reference-style link defined in another block shows as text (the live
    view only: ``final_bundle`` renders the whole answer at once); a frozen block; a fence-like
    line inside a ``$$`` math block; lists nested so that a fence sits in an outer item after an
    inner item started.
    """
    scan = _segment(text, markdown=True)
    return [text[b.start : b.end] for b in scan.blocks], text[scan.tail_start :]


# --- the view model ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """One output of the view: ``key`` names it across renders, ``html`` is safe, ``text`` is plain.

    ``final`` is True when the part can no longer change while the stream goes on (a finished answer
    block, or anything once the stream has ended): a live display never needs to resend it.
    """

    key: str
    html: str
    text: str
    final: bool = False


@dataclass
class RenderCache:
    """Memo for repeated ``render_parts`` calls on one growing state (a live display's).

    Results never depend on it: it spares re-scanning finished blocks, and re-rendering them
    (each flush would otherwise do work proportional to the whole answer: quadratic in the end).
    """

    scan_key: tuple[str, str] | None = None
    scan_prefix: str = ""  # the text of the finished blocks below
    scan_blocks: list[_Block] = field(default_factory=list)
    scan_fence: _Fence | None = None
    parts: list[Part] = field(default_factory=list)  # the finished blocks' parts, in order
    styled: bool = False  # one of them carries CODE_STYLESHEET


def _wrap(kind: str, inner: str, style: str = "") -> str:
    # Answer blocks get no inline style (they are many, and JupyterLab's own rendered-HTML styles
    # already suit both themes); the other parts are few.
    style_attr = f' style="{style}"' if style else ""
    return f'<div class="nito-out nito-{kind}"{style_attr}>{inner}</div>'


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _status(state: Any) -> str:
    status = getattr(state, "status", None)
    if isinstance(status, str) and status:
        return status
    return Status.DONE if getattr(state, "done", False) else Status.STREAMING


def _number(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.6g}" if abs(value) < 1e6 else f"{value:,.0f}"


def _real(value: Any) -> float | None:
    return float(value) if _number(value) is not None else None


def _usage_value(usage: dict[str, Any], *path: str) -> Any:
    value: Any = usage
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def status_text(state: Any) -> str:
    """The one-line summary: state, model, TTFT, speed, chunks, finish reason, usage, cost."""
    status = _status(state)
    items = [f"{_SYMBOLS.get(status, '?')} {status}"]
    model = getattr(state, "model", None)
    if model:
        items.append(str(model)[:200])
    ttft = _real(getattr(state, "ttft", None))
    elapsed = _real(getattr(state, "elapsed", None))
    if ttft is not None:
        items.append(f"TTFT {ttft:.2f} s")
    if elapsed is not None:
        items.append(f"{elapsed:.2f} s {'so far' if status in _RUNNING else 'total'}")
    usage = getattr(state, "usage", None)
    usage = usage if isinstance(usage, dict) else {}
    n_chunks = getattr(state, "n_chunks", None)
    # docs/METRICS.md's output_tps, from its one definition; K is the token-bearing chunks (a
    # duck-typed state without that count: its chunks).
    k = 0
    for value in (getattr(state, "n_token_events", None), n_chunks):
        if isinstance(value, int) and not isinstance(value, bool):
            k = int(value)
            break
    count, source = metrics.n_tokens(usage, k)
    tps = metrics.output_tps(count, ttft, elapsed) if (count or source == "usage") else None
    if tps is not None:
        items.append(f"{tps:,.1f} {'tok/s (usage)' if source == 'usage' else 'chunks/s'}")
    if _number(n_chunks) is not None:
        items.append(f"{n_chunks:,} chunks")
    finish = getattr(state, "finish_reason", None)
    if finish:
        items.append(f"finish: {str(finish)[:60]}")
    tokens = []
    for label, path, always in (
        ("prompt", ("prompt_tokens",), True),
        ("cached", ("prompt_tokens_details", "cached_tokens"), False),
        ("completion", ("completion_tokens",), True),
        ("reasoning", ("completion_tokens_details", "reasoning_tokens"), False),
    ):
        value = _usage_value(usage, *path)
        shown = _number(value)
        if shown is not None and (always or value):
            tokens.append(f"{shown} {label}")
    if tokens:
        items.append("tokens: " + " / ".join(tokens))
    cost = _real(usage.get("cost"))
    if cost is not None:
        # Fixed notation (never 2.3e-05): costs are small, and the digits that matter are last.
        items.append(
            "cost $" + (f"{cost:.6f}".rstrip("0").rstrip(".") if cost < 100 else f"{cost:,.2f}")
        )
    free_tier = getattr(state, "free_tier", None)
    if free_tier is not None:
        items.append(f"free tier: {_compact(free_tier, _FREE_TIER_CHARS)}")
    return " · ".join(items)


def _compact(value: Any, limit: int) -> str:
    """A gateway's object on one short line: ``key=value, ...`` for a flat dict, else JSON (the
    caller escapes it; whitespace, newlines included, is collapsed)."""
    if isinstance(value, dict) and all(not isinstance(v, (dict, list)) for v in value.values()):
        text = ", ".join(f"{k}={v}" for k, v in value.items())
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        except ValueError:  # a circular structure: it cannot come from JSON, show its type only
            text = type(value).__name__
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def progress_text(state: Any) -> str:
    """The footer of a long growing answer: how long and how much so far (the status line, at the
    top of the output, has scrolled out of view by then)."""
    elapsed = _real(getattr(state, "elapsed", None))
    n_chunks = getattr(state, "n_chunks", None)
    items = [f"{elapsed:,.0f} s" if elapsed is not None else None]
    if _number(n_chunks) is not None:
        items.append(f"{n_chunks:,} chunks")
    shown = " · ".join(i for i in items if i)
    return f"{_SYMBOLS[Status.STREAMING]} streaming… {shown} so far" if shown else f"{_SYMBOLS[Status.STREAMING]} streaming…"


def _with_progress(part: Part, state: Any) -> Part:
    # In the HTML only: the plain text of an answer part stays the answer's text (what a reader of
    # text/plain, or a copy of it, gets), and the footer goes when the block is finished.
    footer = f'<div class="nito-out nito-progress" style="{_PROGRESS_STYLE}">{_esc(progress_text(state))}</div>'
    return Part(part.key, part.html + footer, part.text, part.final)


def _status_part(state: Any, final: bool) -> Part:
    text = status_text(state)
    status = _status(state)
    symbol, _, rest = text.partition(" ")
    color = _STATUS_COLORS.get(status, "inherit")
    inner = f'<span style="color: {color}; font-weight: 600;">{_esc(symbol)}</span> {_esc(rest)}'
    return Part("status", _wrap("status", inner, _STATUS_STYLE), text, final)


def _window(text: str, growing: bool) -> tuple[str, int]:
    """The text to show and how many characters before it are hidden (a bounded live window)."""
    if growing and len(text) > WINDOW_CHARS:
        return text[-WINDOW_CHARS:], len(text) - WINDOW_CHARS
    return text, 0


def _reasoning_part(reasoning: str, growing: bool, thinking: bool) -> Part:
    shown, hidden = _window(reasoning, growing)
    label = f"Reasoning ({len(reasoning):,} characters)"
    note = f"… {hidden:,} earlier characters hidden while streaming\n" if hidden else ""
    # Open while the model is still thinking (nothing else to look at yet); closed once the answer
    # starts, and from then on unchanged so a user's own click on it is not undone by updates.
    open_attr = " open" if thinking else ""
    inner = (
        f"<details{open_attr}><summary>{_esc(label)}</summary>"
        f'<pre style="{_PRE_STYLE} {_MUTED_STYLE}">{_esc(note + shown)}</pre></details>'
    )
    return Part("reasoning", _wrap("reasoning", inner), f"{label}:\n{note}{shown}", not growing)


def _refusal_part(refusal: str, final: bool) -> Part:
    """The model declined (OpenAI's ``refusal``): its words, escaped, shown apart from any answer."""
    text = f"⊘ Refusal: {refusal}"
    inner = f'<strong>⊘ Refusal</strong><pre style="{_PRE_STYLE}">{_esc(refusal)}</pre>'
    return Part("refusal", _wrap("refusal", inner, _WARN_STYLE), text, final)


def _render_block(text: str, fence: _Fence | None, highlight: bool) -> str:
    return markdown_to_html(
        text if fence is None else f"{fence.opener}\n{text}", highlight=highlight
    )


def _code_fence(format: str, content: str) -> tuple[bool, _Fence | None]:
    """For ``code`` / ``code:LANG``: (render as Markdown?, the fence the whole answer sits in).

    An answer that opens with its own fence is rendered as Markdown (the model fenced its code);
    otherwise it all sits in an unclosable synthetic fence (12 tildes) in LANG, Python by default.
    """
    if content.lstrip()[:3] in ("```", "~~~"):
        return True, None
    lang = format.partition(":")[2].strip() or "python"
    return True, _Fence("~", 12, 0, "~" * 12 + " " + re.sub(r"[^\w+#.\-]", "", lang))


def _segments(content: str, format: str, cache: RenderCache | None) -> _Scan:
    markdown, fence = (False, None) if format == "text" else (True, None)
    if format.startswith("code"):
        markdown, fence = _code_fence(format, content)
    key = (format, fence.opener if fence else "")
    if cache is not None and cache.scan_key == key and content.startswith(cache.scan_prefix):
        start = len(cache.scan_prefix)
        scan = _segment(content, markdown=markdown, start=start, fence=cache.scan_fence)
        scan = scan._replace(blocks=cache.scan_blocks + scan.blocks)
    else:
        scan = _segment(content, markdown=markdown, fence=fence)
        if cache is not None:
            cache.parts, cache.styled = [], False
    if cache is not None:
        cache.scan_key, cache.scan_prefix = key, content[: scan.tail_start]
        cache.scan_blocks, cache.scan_fence = scan.blocks, scan.tail_fence
    return scan


def _answer_parts(
    content: str, format: str, growing: bool, cache: RenderCache | None, *, split: bool = True
) -> list[Part]:
    if not content.strip():
        # Nothing to see yet. Some gateways open with a bare "\n" before the reasoning (an
        # OpenRouter recording): an answer output made for it would stay above the reasoning,
        # since outputs can only be appended.
        return []
    if split:
        blocks, tail_start, tail_fence, settled = _segments(content, format, cache)
    else:
        fence = _code_fence(format, content)[1] if format.startswith("code") else None
        blocks, tail_start, tail_fence, settled = [], 0, fence, len(content)
    memo = cache if split else None
    parts = list(memo.parts) if memo is not None else []
    styled = memo.styled if memo is not None else False

    def make(index: int, text: str, fence: _Fence | None, final: bool) -> Part:
        nonlocal styled
        if format == "text":
            inner = f'<pre style="{_PRE_STYLE}">{_esc(text)}</pre>'
        else:
            # The live tail is not highlighted: it is re-sent at every update, and plain escaped
            # code is about half the bytes. It gets its colours once it is finished.
            inner = _render_block(text, fence, final)
        if not styled and _HIGHLIGHT_MARK in inner:
            inner = CODE_STYLESHEET + inner
            styled = True
        return Part(f"answer-{index}", _wrap("answer", inner), text, final)

    for index in range(len(parts), len(blocks)):
        block = blocks[index]
        parts.append(make(index, content[block.start : block.end], block.fence, True))
    if memo is not None:
        memo.parts, memo.styled = list(parts), styled
    # While growing, the tail stops where the text is settled (a last line that may yet start a
    # block of its own waits for the characters that decide it), so shown text never moves.
    end = settled if growing else len(content)
    if tail_start < end:
        parts.append(make(len(blocks), content[tail_start:end], tail_fence, not growing))
    return parts


def _tool_part(call: Any, position: int, growing: bool) -> Part:
    index = getattr(call, "index", position)
    name = getattr(call, "name", None) or "?"
    call_id = getattr(call, "id", None)
    arguments = getattr(call, "arguments", None) or ""
    arguments = arguments if isinstance(arguments, str) else str(arguments)
    valid = bool(getattr(call, "valid_json", False))
    warning = ""
    if growing:
        shown, hidden = _window(arguments, growing)
        body = (f"… {hidden:,} earlier characters hidden\n" if hidden else "") + shown
    elif valid:
        try:
            body = json.dumps(getattr(call, "parsed", None), indent=2, ensure_ascii=False)
        except (TypeError, ValueError):
            body = arguments
    else:
        body = arguments
        if arguments.strip() or getattr(call, "json_error", None):
            reason = getattr(call, "json_error", None) or "not valid JSON"
            warning = f"⚠ the arguments are not valid JSON: {str(reason)[:300]}"
    title = f"Tool call {name}" + (f" ({call_id})" if call_id else "")
    inner = f"<div><strong>{_esc(title)}</strong></div>"
    if warning:
        inner += f'<div style="{_WARN_STYLE}">{_esc(warning)}</div>'
    inner += f'<pre style="{_PRE_STYLE}">{_esc(body)}</pre>'
    text = "\n".join(filter(None, [title, warning, body]))
    return Part(f"tool-{index}", _wrap("tool", inner, _CARD_STYLE), text, not growing)


def _error_part(state: Any, status: str, final: bool) -> Part | None:
    error = getattr(state, "error", None)
    if error:
        if isinstance(error, dict):
            code, message = error.get("code"), error.get("message")
        else:
            code, message = None, error
        message = str(message if message is not None else "")[:_MAX_ERROR_CHARS]
        head = "Error" + (f" {str(code)[:80]}" if code not in (None, "") else "")
        text = f"✗ {head}: {message}" if message else f"✗ {head}"
        style = _ERROR_STYLE
    elif status == Status.TRUNCATED:
        text = "⚠ The stream ended without [DONE]: the answer may be incomplete."
        style = _WARN_STYLE
    elif status == Status.FAILED:
        text = "✗ The request failed before the answer started."
        style = _ERROR_STYLE
    else:
        return None
    return Part("error", _wrap("error", _esc(text), style), text, final)


def _anomalies_part(anomalies: Sequence[Any]) -> Part:
    lines = [str(a)[:300] for a in list(anomalies)[:_MAX_ANOMALIES_LISTED]]
    more = len(anomalies) - len(lines)
    if more > 0:
        lines.append(f"… and {more} more")
    label = f"{len(anomalies)} protocol anomal{'y' if len(anomalies) == 1 else 'ies'}"
    items = "".join(f"<li>{_esc(line)}</li>" for line in lines)
    inner = f'<details><summary style="{_MUTED_STYLE}">{_esc(label)}</summary><ul>{items}</ul></details>'
    return Part(
        "anomalies", _wrap("anomalies", inner, _STATUS_STYLE), "\n".join([label, *lines]), True
    )


def check_format(format: str) -> None:
    if format not in ("markdown", "text") and not (format == "code" or format.startswith("code:")):
        raise ValueError(f"format must be one of markdown, text, code or code:LANG, not {format!r}")


def render_parts(
    state: Any, *, format: str = "markdown", live: bool = True, cache: RenderCache | None = None
) -> list[Part]:
    """The ordered outputs for ``state`` (duck-typed like a Stream).

    Order: ``status``, ``reasoning``, ``answer-0`` ... ``answer-N`` (finished blocks, then the live
    tail under the next number), ``refusal``, ``tool-<index>`` cards, ``error``, ``anomalies``. Parts only ever
    get added after those that exist, in arrival order of the stream, so a display can append.
    ``live=True`` while the stream runs: long reasoning and tool arguments show a bounded window,
    the tail is not highlighted, anomalies wait for the end (appending them mid-stream would put
    them above later answer blocks). A finished state renders complete whatever ``live`` says.
    """
    check_format(format)
    status = _status(state)
    growing = live and status in _RUNNING
    content = getattr(state, "content", None) or ""
    reasoning = getattr(state, "reasoning", None) or ""
    tool_calls = list(getattr(state, "tool_calls", None) or [])
    parts = [_status_part(state, not growing)]
    if reasoning:
        thinking = growing and not content and not tool_calls
        parts.append(_reasoning_part(reasoning, growing, thinking))
    parts.extend(_answer_parts(content, format, growing, cache))
    refusal = getattr(state, "refusal", None)
    if refusal and isinstance(refusal, str):
        parts.append(_refusal_part(refusal, not growing))
    parts.extend(_tool_part(call, i, growing) for i, call in enumerate(tool_calls))
    error = _error_part(state, status, not growing)
    if error is not None:
        parts.append(error)
    anomalies = list(getattr(state, "anomalies", None) or [])
    if anomalies and not growing:
        parts.append(_anomalies_part(anomalies))
    # A long answer pushes the status line out of view: its live tail (always the last output
    # while the answer grows, and re-sent anyway) carries a small progress footer.
    last = parts[-1]
    if growing and len(content) >= PROGRESS_AFTER_CHARS and last.key.startswith("answer-") and not last.final:
        parts[-1] = _with_progress(last, state)
    return parts


def bundle(part: Part) -> dict[str, str]:
    """The mime bundle of one part: ``text/html`` and ``text/plain`` (never ``text/markdown``)."""
    return {"text/html": part.html, "text/plain": part.text}


def join_parts(parts: Iterable[Part]) -> dict[str, str]:
    """One mime bundle holding several parts, in order."""
    parts = list(parts)
    htmls = "".join(p.html for p in parts)
    texts = "\n\n".join(p.text.rstrip("\n") for p in parts if p.text)
    return {"text/html": htmls, "text/plain": texts}


def final_bundle(state: Any, *, format: str = "markdown") -> dict[str, str]:
    """One mime bundle of the whole answer as it stands (for ``_repr_mimebundle_`` and saving).

    Unlike the live parts, the answer is rendered in one piece (reference links resolve), and
    reasoning and tool arguments are shown whole.
    """
    check_format(format)
    content = getattr(state, "content", None) or ""
    parts = [
        p for p in render_parts(state, format=format, live=False) if not p.key.startswith("answer-")
    ]
    answer = _answer_parts(content, format, False, None, split=False)
    at = 2 if len(parts) > 1 and parts[1].key == "reasoning" else 1
    return join_parts([*parts[:at], *answer, *parts[at:]])
