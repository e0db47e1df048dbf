"""The view model: a state's ordered parts (``render_parts``), their mime bundles, the final
bundle, and the one format check (``check_format``).

Every string the gateway controls reaches a part's HTML escaped here or through
``markdown.markdown_to_html``, and a part's plain text with its control characters shown as
escapes (``_core/printable.py``: JupyterLab and terminals act on an ANSI escape in text/plain); the
answer is cut by ``blocks`` so a live display re-sends only its tail; the status line is
``status``'s; the looks are ``styles``'.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._core.printable import printable
from .._core.status import BANNERS, RUNNING, SYMBOLS, Status
from .blocks import _Block, _Fence, _Scan, _segment
from .markdown import markdown_to_html
from .plain import excerpt, piece
from .status_line import _status, progress_text, status_text
from .structured import structured_view
from .styles import (
    _CARD_STYLE,
    _ERROR_STYLE,
    _HIGHLIGHT_MARK,
    _MUTED_STYLE,
    _PRE_STYLE,
    _PROGRESS_STYLE,
    _STATUS_COLORS,
    _STATUS_STYLE,
    _WARN_STYLE,
    CODE_STYLESHEET,
)

__all__ = [
    "FORMATS",
    "Part",
    "RenderCache",
    "bundle",
    "check_format",
    "final_bundle",
    "join_answer_blocks",
    "join_parts",
    "render_parts",
]

FORMATS = ("markdown", "text", "code")

#: While streaming, long reasoning and tool arguments show only their last characters.
WINDOW_CHARS = 2048
_MAX_ANOMALIES_LISTED = 20
#: A growing answer longer than this (about a screen) shows a progress footer under its live tail.
PROGRESS_AFTER_CHARS = 3000
_MAX_ERROR_CHARS = 4000

_RUNNING = RUNNING
#: Where all of a long reasoning is (``plain.py``'s line).
_REASONING = "the Stream's .reasoning (_nito.reasoning after %%nito)"


# --- the view model ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """One output of the view: ``key`` names it across renders, ``html`` is safe, ``text`` is plain.

    ``final`` is True when the part can no longer change while the stream goes on (a finished answer
    block, or anything once the stream has ended): a live display never needs to resend it.
    ``plain`` is what the part's output carries as ``text/plain`` (``bundle``, a live slot): its
    ``text``, or for a long answer, reasoning or tool call its share of the head and tail that
    ``plain.py`` keeps (the HTML shows everything); ``text`` stays whole (a live column's window
    is measured on it). Both are printable whatever they were made of: their control characters
    (an ANSI escape, a lone carriage return, a bidi override) are shown as escapes
    (``printable``), here, so that no text/plain output of any part (a bundle, a live slot, the
    grid, the chat widget) can miss it.
    """

    key: str
    html: str
    text: str
    final: bool = False
    plain: str | None = None  # None: the same as text

    def __post_init__(self) -> None:
        raw, plain = self.text, self.plain
        text = printable(raw)
        object.__setattr__(self, "text", text)
        # Most often the same characters (a block in the head of the answer): made printable once.
        object.__setattr__(
            self, "plain", text if plain is None or plain == raw else printable(plain)
        )


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


_ANSWER_OPEN = _wrap("answer", "").removesuffix("</div>")
_HEADING_RE = re.compile(r"<h[1-6]>")


def join_answer_blocks(parts: Sequence[Part]) -> str:
    """The HTML of several answer blocks shown in one output: one wrapper around them all.

    Each block's own wrapper, 40 bytes, came to a fifth of the bytes a live view sends for an
    answer of short paragraphs (bench/bench_display.py; docs/BENCHMARKS.md). A heading block keeps
    a plain ``<div>`` of its own: JupyterLab halves a heading's margins when it is the first or
    last child of its element, as it was in its own wrapper, so the page looks as before. Other
    blocks' margins collapse through a ``<div>`` alike, with or without one.
    """
    inner = []
    for part in parts:
        body = part.html
        if not (body.startswith(_ANSWER_OPEN) and body.endswith("</div>")):
            return "".join(p.html for p in parts)  # not a plain answer block: as they are
        body = body[len(_ANSWER_OPEN) : -len("</div>")]
        inner.append(f"<div>{body}</div>" if _HEADING_RE.search(body) else body)
    return _wrap("answer", "".join(inner))


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _with_progress(part: Part, state: Any) -> Part:
    # In the HTML only: the plain text of an answer part stays the answer's text (what a reader of
    # text/plain, or a copy of it, gets), and the footer goes when the block is finished.
    footer = f'<div class="nito-out nito-progress" style="{_PROGRESS_STYLE}">{_esc(progress_text(state))}</div>'
    return dataclasses.replace(part, html=part.html + footer)


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
    # Growing, it is a window already; whole, its text/plain keeps the head and the tail.
    plain = None if growing else f"{label}:\n{excerpt(reasoning, _REASONING)}"
    return Part(
        "reasoning", _wrap("reasoning", inner), f"{label}:\n{note}{shown}", not growing, plain
    )


def _transcript_part(transcript: str, final: bool) -> Part:
    """The words of an audio answer (OpenAI's ``delta.audio.transcript``), escaped: the audio
    itself stays in the log, and ``content`` is empty in that mode."""
    text = f"🔊 Audio transcript: {transcript}"
    inner = (
        f'<strong>🔊 Audio transcript</strong><pre style="{_PRE_STYLE}">{_esc(transcript)}</pre>'
    )
    return Part("audio", _wrap("audio", inner, ""), text, final)


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

    def make(index: int, text: str, fence: _Fence | None, final: bool, plain: str) -> Part:
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
        return Part(f"answer-{index}", _wrap("answer", inner), text, final, plain)

    # Each block's text/plain is its share of the answer's (``plain.py``): the head's characters
    # in it; the last part's also the line saying what was left out, and the tail.
    for index in range(len(parts), len(blocks)):
        block = blocks[index]
        share = piece(content, block.start, block.end, last=False)
        parts.append(make(index, content[block.start : block.end], block.fence, True, share))
    if memo is not None:
        memo.parts, memo.styled = list(parts), styled
    # While growing, the tail stops where the text is settled (a last line that may yet start a
    # block of its own waits for the characters that decide it), so shown text never moves.
    end = settled if growing else len(content)
    if tail_start < end:
        share = piece(content, tail_start, end, last=True, growing=growing)
        parts.append(make(len(blocks), content[tail_start:end], tail_fence, not growing, share))
    elif not growing and blocks:
        # The answer ends with a finished block: that one carries the tail (its output is sent
        # once more). While growing, the next render's live tail will.
        share = piece(content, blocks[-1].start, len(content), last=True)
        parts[-1] = dataclasses.replace(parts[-1], plain=share)
    return parts


def _tool_part(call: Any, position: int, growing: bool) -> Part:
    index = getattr(call, "index", position)
    name = getattr(call, "name", None) or "?"
    call_id = getattr(call, "id", None)
    arguments = getattr(call, "arguments", None) or ""
    arguments = arguments if isinstance(arguments, str) else str(arguments)
    valid = bool(getattr(call, "valid_json", False))
    warning = ""
    # A growing call, or an OpenAI custom tool call (its input is free text, not JSON): as it is.
    if growing or getattr(call, "type", None) == "custom":
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
    # Growing, the arguments are a window already; whole, the text/plain keeps their head and tail.
    where = f"the Stream's .tool_calls[{position}].arguments"
    plain = None if growing else "\n".join(filter(None, [title, warning, excerpt(body, where)]))
    return Part(f"tool-{index}", _wrap("tool", inner, _CARD_STYLE), text, not growing, plain)


def _structured_part(state: Any, structured: Any, status: str, growing: bool) -> Part | None:
    """A ``schema=`` answer: the object as it is parsed, then checked (``structured.py``)."""
    content = getattr(state, "content", None) or ""
    refusal = getattr(state, "refusal", None)
    view = structured_view(
        content,
        structured,
        growing,
        refusal if isinstance(refusal, str) else None,
        status == Status.DONE,
    )
    if view is None:
        return None
    inner, text = view
    return Part("structured", _wrap("structured", inner, _CARD_STYLE), text, not growing)


def _error_part(state: Any, status: str, final: bool) -> Part | None:
    error = getattr(state, "error", None)
    if error:
        if isinstance(error, dict):
            code, message = error.get("code"), error.get("message")
        else:
            code, message = None, error
        message = str(message if message is not None else "")[:_MAX_ERROR_CHARS]
        head = "Error" + (f" {str(code)[:80]}" if code not in (None, "") else "")
        # The gateway's words, in the HTML too: a bidi override there would reorder the banner.
        text = printable(
            f"{SYMBOLS[Status.ERROR]} {head}: {message}"
            if message
            else f"{SYMBOLS[Status.ERROR]} {head}"
        )
        style = _ERROR_STYLE
    elif status == Status.TRUNCATED or status == Status.FAILED:
        text = f"{SYMBOLS[status]} {BANNERS[status]}"
        style = _WARN_STYLE if status == Status.TRUNCATED else _ERROR_STYLE
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
    """Raise ``ValueError`` (one line that says what is allowed) unless ``format`` is one of
    ``FORMATS`` or ``code:LANG``: every caller that takes a format checks it here, up front."""
    if format not in ("markdown", "text") and not (format == "code" or format.startswith("code:")):
        raise ValueError(f"format must be one of markdown, text, code or code:LANG, not {format!r}")


def render_parts(
    state: Any,
    *,
    format: str = "markdown",
    live: bool = True,
    cache: RenderCache | None = None,
    structured: Any = None,
) -> list[Part]:
    """The ordered outputs for ``state`` (duck-typed like a Stream).

    Order: ``status``, ``reasoning``, ``answer-0`` ... ``answer-N`` (finished blocks, then the live
    tail under the next number), ``refusal``, ``audio`` (an audio answer's transcript), ``tool-<index>`` cards,
    ``error``, ``anomalies``. Parts only ever
    get added after those that exist, in arrival order of the stream, so a display can append.
    ``live=True`` while the stream runs: long reasoning and tool arguments show a bounded window,
    the tail is not highlighted, anomalies wait for the end (appending them mid-stream would put
    them above later answer blocks). A finished state renders complete whatever ``live`` says.
    ``structured``: the call's schema (``nito_nb._structured.Schema``, or None): the answer is
    then one ``structured`` part, the object as parsed so far (then checked), in the answer's place.
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
    if structured is None:
        parts.extend(_answer_parts(content, format, growing, cache))
    else:
        part = _structured_part(state, structured, status, growing)
        if part is not None:
            parts.append(part)
    refusal = getattr(state, "refusal", None)
    if refusal and isinstance(refusal, str):
        parts.append(_refusal_part(refusal, not growing))
    transcript = getattr(state, "audio_transcript", None)
    if transcript and isinstance(transcript, str):
        parts.append(_transcript_part(transcript, not growing))
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
    if (
        growing
        and len(content) >= PROGRESS_AFTER_CHARS
        and last.key.startswith("answer-")
        and not last.final
    ):
        parts[-1] = _with_progress(last, state)
    return parts


def bundle(part: Part) -> dict[str, str]:
    """The mime bundle of one part: ``text/html`` and ``text/plain`` (never ``text/markdown``)."""
    return {"text/html": part.html, "text/plain": part.plain or ""}


def join_parts(parts: Iterable[Part]) -> dict[str, str]:
    """One mime bundle holding several parts, in order."""
    parts = list(parts)
    htmls = "".join(p.html for p in parts)
    texts = "\n\n".join((p.plain or "").rstrip("\n") for p in parts if p.plain)
    return {"text/html": htmls, "text/plain": texts}


def final_bundle(
    state: Any, *, format: str = "markdown", structured: Any = None, without: tuple[str, ...] = ()
) -> dict[str, str]:
    """One mime bundle of the whole answer as it stands (for ``_repr_mimebundle_`` and saving).

    Unlike the live parts, the answer is rendered in one piece (reference links resolve), and
    reasoning and tool arguments are shown whole. ``structured``: as for ``render_parts``.
    ``without``: the keys of parts left out (a choice's column leaves the stream's status out).
    """
    check_format(format)
    if structured is not None:
        return join_parts(
            p
            for p in render_parts(state, format=format, live=False, structured=structured)
            if p.key not in without
        )
    content = getattr(state, "content", None) or ""
    parts = [
        p
        for p in render_parts(state, format=format, live=False)
        if not p.key.startswith("answer-") and p.key not in without
    ]
    answer = _answer_parts(content, format, False, None, split=False)
    # After the status line and the reasoning, where there are.
    at = sum(1 for p in parts[:2] if p.key in ("status", "reasoning"))
    return join_parts([*parts[:at], *answer, *parts[at:]])
