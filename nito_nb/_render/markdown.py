"""Markdown to safe HTML: markdown-it set up once, link and URL checks, code highlighting.

Model text is data, never markup that runs: raw HTML comes out escaped, links keep only
http(s)/mailto/relative targets, images become links, and fenced code is highlighted into our own
``<pre>`` (the classes are coloured by ``styles.CODE_STYLESHEET``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from mdit_py_plugins.dollarmath import dollarmath_plugin
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from .styles import _HIGHLIGHT_MARK, _token_class

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
# (highlight, linkify): the linkify pass is a good part of the rendering time
# (docs/BENCHMARKS.md), so it runs only on text that can hold a link at all.
_MD = {(h, lk): _make_markdown(h, lk) for h in (True, False) for lk in (True, False)}


# How a line of a paragraph may start so that no block rule can take it (CommonMark, GFM tables,
# ``$$`` math): a letter, a number that is not a list marker ("2." and "3)" are), or bold text.
# Everything else (a marker, "#", ">", a fence, "[", "|", "$$", an underline...) goes the long way.
_PLAIN_LINE_START_RE = re.compile(r"(?:[^\W\d_]|\d+(?![\d.)])|\*\*[^\W_])")
_LINE_INDENT_RE = re.compile(r"\n +")


def _one_paragraph(text: str) -> str | None:
    """The inline content of ``text`` if it is one paragraph and nothing else, else None.

    A live answer is rendered block by block, and most blocks are one paragraph: for those,
    markdown-it's block pass (about half its time) can only find that paragraph, so its inline
    pass is run alone, on the content the paragraph rule would give it (the lines, trimmed), and
    not even that when the content holds nothing it acts on (``markdown_to_html``). Only
    text no block rule can start on is taken: no tab, no control or non-space blank character,
    no "|", no blank line inside, at most 3 spaces before the first line, and each line starting
    as ``_PLAIN_LINE_START_RE`` allows. tests/test_markdown_fast_path.py checks that the HTML is
    markdown-it's own, on generated text and on every sample answer.
    """
    if "|" in text or "\t" in text:
        return None
    lines = text.split("\n")
    while lines and not lines[-1].strip(" "):
        lines.pop()
    if not lines or len(lines[0]) - len(lines[0].lstrip(" ")) > 3:
        return None
    for line in lines:
        body = line.lstrip(" ")
        if not body or not line.isprintable() or _PLAIN_LINE_START_RE.match(body) is None:
            return None
    return "\n".join(lines).strip(" ")


def markdown_to_html(text: str, *, highlight: bool = True) -> str:
    """Markdown (CommonMark + GFM tables and strikethrough + ``$`` math as text) to safe HTML.

    Raw HTML in ``text`` comes out escaped, links (bare URLs with a scheme and e-mail addresses
    too) keep only http(s)/mailto/relative targets and open in a new tab with
    ``rel="noopener noreferrer"``, images become links, fenced code is highlighted with Pygments
    (``highlight=False``: escaped plain text). Partial Markdown (an
    unclosed fence, half a table) renders as CommonMark says: an open fence runs to the end.
    """
    # Every link linkify-it finds holds "//" (a scheme's "://", or a protocol-relative "//host")
    # or "@" (an e-mail address, "mailto:"): "://" alone missed "//host" (found by hypothesis).
    linkable = "//" in text or "@" in text
    md = _MD[highlight, linkable]
    content = _one_paragraph(text)
    if content is None:
        return md.render(text)
    if linkable or " \n" in content:
        return f"<p>{md.renderInline(content)}</p>\n"
    stops = md.inline.terminator_re
    if content.startswith("**") and content.endswith("**") and "\n" not in content:
        # A line in bold and nothing else (a model's usual heading): the inner text starts with
        # a letter or digit (_PLAIN_LINE_START_RE) and does not end in a blank, so both runs of
        # "**" are delimiters that match, as CommonMark's flanking rules say.
        inner = content[2:-2]
        if inner and not inner[-1].isspace() and stops.search(inner) is None:
            return f"<p><strong>{escapeHtml(inner)}</strong></p>\n"
    if stops.search(content.replace("\n", "")) is not None:
        return f"<p>{md.renderInline(content)}</p>\n"
    # No character the inline pass stops at (its text rule's terminators, the plugins' included):
    # it would escape the text, and drop the spaces that start a line (a line that ends in
    # spaces, a hard break, went the long way above).
    text_only = _LINE_INDENT_RE.sub("\n", content)
    return f"<p>{escapeHtml(text_only)}</p>\n"
