"""The renderer: safe HTML from hostile model text, stable block splitting, the view model."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from display_samples import make_state
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nito_nb._render import (
    Part,
    RenderCache,
    bundle,
    final_bundle,
    markdown_to_html,
    render_parts,
    split_blocks,
    status_text,
)
from nito_nb._render.blocks import FREEZE_CHARS, _segment
from nito_nb._render.parts import WINDOW_CHARS
from nito_nb._render.styles import CODE_STYLESHEET


def tool_call(index: int = 0, **overrides: Any) -> SimpleNamespace:
    fields: dict[str, Any] = {
        "index": index,
        "id": f"call_{index}",
        "type": "function",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
        "valid_json": True,
        "parsed": {"city": "Paris"},
        "json_error": None,
    }
    fields.update(overrides)
    return SimpleNamespace(**fields)


# --- an HTML checker: only allowlisted markup may come out ----------------------------------------

ALLOWED_TAGS = {
    "a", "b", "blockquote", "br", "code", "del", "details", "div", "em", "h1", "h2", "h3", "h4",
    "h5", "h6", "hr", "i", "li", "ol", "p", "pre", "s", "span", "strong", "style", "summary",
    "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
ALLOWED_ATTRS = {"class", "style", "href", "rel", "target", "title", "start", "open"}
STYLE_OK = re.compile(r"^[\w\s:;,.#%()\-!'\"/]*$")
STYLESHEET_BODY = CODE_STYLESHEET[len("<style>") : -len("</style>")]


class MarkupChecker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._check(tag, attrs)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._check(tag, attrs)

    def _check(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ALLOWED_TAGS:
            self.problems.append(f"tag <{tag}>")
        self._in_style = tag == "style"
        for name, value in attrs:
            value = value or ""
            if name not in ALLOWED_ATTRS or name.startswith("on"):
                self.problems.append(f"attribute {name}= on <{tag}>")
            if name == "href":
                # What a browser does: drop ASCII whitespace/controls, then read the scheme.
                squeezed = re.sub(r"[\x00-\x20]", "", html.unescape(value)).lower()
                scheme = re.match(r"^([a-z][a-z0-9+.\-]*):", squeezed)
                if scheme and scheme.group(1) not in ("http", "https", "mailto"):
                    self.problems.append(f"href {value!r}")
            if name == "style" and (not STYLE_OK.match(value) or "url(" in value.lower()):
                self.problems.append(f"style {value!r}")
            if name == "target" and value != "_blank":
                self.problems.append(f"target {value!r}")

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style and data != STYLESHEET_BODY:
            self.problems.append(f"stylesheet {data[:80]!r}")


def markup_problems(markup: str) -> list[str]:
    checker = MarkupChecker()
    checker.feed(markup)
    checker.close()
    lowered = markup.lower()
    # Text such as "javascript:" may appear escaped as words; only hrefs (checked above) matter.
    for needle in ("<script", "<img", "<svg", "<iframe", "<object", "<embed", "<math"):
        if needle in lowered:
            checker.problems.append(f"raw {needle}")
    return checker.problems


HOSTILE = [
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    '"><svg onload=alert(1)>',
    "'><iframe src=javascript:alert(1)>",
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html;base64,PHNjcmlwdD4=)",
    "[x](file:///etc/passwd)",
    "[x](&#106;avascript:alert(1))",
    "[x](java\tscript:alert(1))",
    "![y](javascript:alert(1))",
    '![y](x "onerror=alert(1)")',
    "<javascript:alert(1)>",
    "&lt;script&gt;",
    "&#60;img src=x onerror=alert(1)&#62;",
    "```",
    "```html\n<script>x</script>",
    "`<b onmouseover=alert(1)>`",
    "$<img src=x onerror=alert(1)>$",
    "$$\n<svg onload=alert(1)>\n$$",
    "| <img src=x> | b |\n|---|---|\n| <script> | d |",
    "<a href=javascript:alert(1)>x</a>",
    "[a](<javascript:alert(1)>)",
    "<style>*{x:expression(alert(1))}</style>",
    "\n\n",
    "\n- ",
    "> ",
    "    ",
]
hostile_text = st.lists(st.sampled_from(HOSTILE) | st.text(max_size=12), max_size=8).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    content=hostile_text,
    reasoning=hostile_text,
    name=hostile_text,
    arguments=hostile_text,
    call_id=hostile_text,
    message=hostile_text,
    code=hostile_text,
    model=hostile_text,
    usage_value=hostile_text,
    anomaly=hostile_text,
    finish=hostile_text,
    refusal=hostile_text,
    status=st.sampled_from(["waiting", "streaming", "done", "error", "truncated", "failed"])
    | hostile_text,
    live=st.booleans(),
    format=st.sampled_from(["markdown", "text", "code", "code:html"]),
)
def test_no_model_string_makes_markup(
    content: str,
    reasoning: str,
    name: str,
    arguments: str,
    call_id: str,
    message: str,
    code: str,
    model: str,
    usage_value: str,
    anomaly: str,
    finish: str,
    refusal: str,
    status: str,
    live: bool,
    format: str,
) -> None:
    state = make_state(
        content=content,
        reasoning=reasoning,
        tool_calls=[
            tool_call(0, name=name, id=call_id, arguments=arguments, valid_json=False, parsed=None),
            tool_call(1, name=name, arguments="{}", parsed={name: arguments}),
        ],
        error={"code": code, "message": message, "metadata": {"raw": message}},
        status=status,
        model=model,
        finish_reason=finish,
        refusal=refusal,
        usage={"prompt_tokens": usage_value, "completion_tokens": 3, "cost": usage_value},
        anomalies=[SimpleNamespace(kind=anomaly, message=anomaly, seq=1, __str__=None), anomaly],
    )
    parts = render_parts(state, format=format, live=live)
    outputs = [p.html for p in parts] + [final_bundle(state, format=format)["text/html"]]
    for markup in outputs:
        assert markup_problems(markup) == [], markup
    assert all("text/markdown" not in bundle(p) for p in parts)


@pytest.mark.parametrize("payload", HOSTILE)
def test_each_payload_is_inert_in_markdown(payload: str) -> None:
    assert markup_problems(markdown_to_html(payload)) == []


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key=hostile_text,
    value=hostile_text,
    title=hostile_text,
    cut=st.integers(0, 400),
    live=st.booleans(),
    pydantic_model=st.booleans(),
    status=st.sampled_from(["streaming", "done", "truncated", "error"]),
)
def test_no_model_string_makes_markup_in_a_structured_answer(
    key: str, value: str, title: str, cut: int, live: bool, pydantic_model: bool, status: str
) -> None:
    # issue 33: field names, values, the schema's name and the validation messages (which quote
    # the values) are the model's, shown as the object grows (a document cut anywhere) and at the end.
    import json

    import pydantic

    from nito_nb._structured import schema_of

    class Model(pydantic.BaseModel):
        label: int

    schema = (
        schema_of(Model)
        if pydantic_model
        else schema_of(
            {
                "title": title,
                "type": "object",
                "properties": {key: {"type": "integer"}, "label": {"enum": [value]}},
            }
        )
    )
    text = json.dumps({key: value, "label": [value, {value: key}]}, ensure_ascii=False)
    state = make_state(content=text[:cut] if live else text, status=status)
    parts = render_parts(state, live=live, structured=schema)
    outputs = [p.html for p in parts] + [final_bundle(state, structured=schema)["text/html"]]
    for markup in outputs:
        assert markup_problems(markup) == [], markup


def test_checker_catches_markup() -> None:
    # The checker itself must see what it is looking for.
    assert markup_problems('<img src=x onerror="a()">')
    assert markup_problems('<a href=" java\tscript:x">x</a>')
    assert markup_problems('<div onclick="x"></div>')
    assert markup_problems("<style>p{}</style>")


# --- Markdown ---------------------------------------------------------------------------------------


def test_code_block_shows_html_literally() -> None:
    out = markdown_to_html("```python\nprint('<div>')\n```\n\n```\n<div>&amp;</div>\n```\n")
    assert "<div>" not in out
    assert "&lt;div&gt;" in out
    assert "&amp;amp;" in out  # an entity in code stays the characters the model wrote
    assert '<span class="b">print</span>' in out  # highlighted by Pygments
    assert '<span class="s">' in out


def test_unknown_language_is_escaped_plain() -> None:
    out = markdown_to_html("```no-such-language\na <b> c\n```\n")
    assert '<pre class="nito-code"><code>a &lt;b&gt; c\n</code></pre>' in out


def test_inline_code_is_not_double_escaped() -> None:
    assert "<code>&lt;div&gt; &amp;&amp;</code>" in markdown_to_html("`<div> &&`")


def test_tables_lists_strikethrough() -> None:
    out = markdown_to_html(
        "| a | b |\n|:--|--:|\n| 1 | 2 |\n\n- x\n- y\n\n1. one\n\n~~old~~ **new**\n"
    )
    assert "<table>" in out and "<th" in out and 'style="text-align:right"' in out
    assert "<ul>\n<li>x</li>" in out
    assert "<ol>" in out
    assert "<s>old</s>" in out and "<strong>new</strong>" in out


def test_links_safe_and_marked() -> None:
    out = markdown_to_html("[a](https://example.com) <https://x.org> [m](mailto:a@b.c) [r](#sec)")
    assert out.count('rel="noopener noreferrer" target="_blank"') == 4
    for bad in ("javascript:x", "vbscript:x", "data:text/html,x", "file:///x", "ftp://x"):
        out = markdown_to_html(f"[bad]({bad})")
        assert "<a" not in out, bad


def test_bare_urls_become_checked_links() -> None:
    out = markdown_to_html("Docs: https://example.com/a?b=1. Mail a@b.org.")
    assert '<a href="https://example.com/a?b=1" rel="noopener noreferrer" target="_blank">' in out
    assert '<a href="mailto:a@b.org"' in out and out.count("<a ") == 2
    # No guesses without a scheme ("setup.py" is also a domain), no other schemes, nothing in code.
    for text in (
        "run setup.py",
        "www.example.com",
        "ftp://x.org/f",
        "javascript:alert(1)",
        "`https://e.com`",
    ):
        assert "<a" not in markdown_to_html(text), text
    # What follows a URL is never part of its markup.
    out = markdown_to_html(
        'https://e.com/"onmouseover="alert(1) http://x.com/<img src=x onerror=y>'
    )
    assert "<img" not in out and 'href="https://e.com/%22onmouseover=%22alert(1)"' in out


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab:/.@<>[]()` \nhtps", max_size=40))
@example("//`.a")  # a protocol-relative link: linkify finds it though it has no "://"
def test_linkify_runs_only_where_it_can_change_something(text: str) -> None:
    # markdown_to_html skips the linkify pass for text with no "://" and no "@": same HTML.
    from nito_nb._render.markdown import _MD

    assert markdown_to_html(text) == _MD[True, True].render(text)


def test_images_become_links() -> None:
    out = markdown_to_html("![chart](https://e.com/c.png)")
    assert "<img" not in out
    assert '<a href="https://e.com/c.png"' in out and "[image: chart]" in out


def test_math_left_as_text() -> None:
    out = markdown_to_html("Euler: $e^{i\\pi} + 1 = 0$ and $a*b*c$.\n\n$$\nx_1 \\\\ y\n$$\n")
    assert "$e^{i\\pi} + 1 = 0$" in out
    assert "$a*b*c$" in out  # not emphasis
    assert "$$\nx_1 \\\\ y\n$$" in out
    assert "<em>" not in out
    assert "$5 and $10" in markdown_to_html("It costs $5 and $10.")


@pytest.mark.parametrize(
    "partial",
    [
        "```python\ndef f(",
        "| a | b |\n|--",
        "**bold",
        "[link](http://x",
        "- a\n  - b\n    ```",
        "$$\nx",
    ],
)
def test_partial_markdown_renders(partial: str) -> None:
    out = markdown_to_html(partial)
    assert out and markup_problems(out) == []


# --- splitting ----------------------------------------------------------------------------------

LINES = [
    "", "", "para", "more text", "- item", "* item", "1. one", "2) two", "  indented", "    code",
    "```", "```py", "````", "~~~", "  ```", "> quote", "| a | b |", "|---|---|", "$$", "$$x$$",
    "===", "---", "a `tick` b", "\t", "\r",
]  # fmt: skip
markdownish = st.lists(st.sampled_from(LINES) | st.text(max_size=6), max_size=40).map("\n".join)


def test_split_examples() -> None:
    text = "Intro\nline two\n\n- a\n\n- b\n\nNext\n```py\nx\n\n\ny\n```\nafter\n\ntail"
    finished, tail = split_blocks(text)
    assert finished == [
        "Intro\nline two\n\n",
        "- a\n\n- b\n\n",  # a loose list stays whole
        "Next\n```py\nx\n\n\ny\n```\n",
        "after\n\n",  # "tail" can only start a paragraph of its own
    ]
    assert tail == "tail"
    # The block before a blank line is finished once the next line's first characters decide it.
    assert split_blocks("a\n\n") == ([], "a\n\n")
    assert split_blocks("a\n\nb") == (["a\n\n"], "b")
    assert split_blocks("a\n\nb\n") == (["a\n\n"], "b\n")
    assert split_blocks("a\n\n1") == ([], "a\n\n1")  # "1." would be a list item...
    assert split_blocks("a\n\n12:30 is") == (["a\n\n"], "12:30 is")  # ...this is not
    assert split_blocks("- a\n\n- b") == ([], "- a\n\n- b")  # the list goes on
    # An open fence keeps everything.
    assert split_blocks("```\na\n\nb\n\nc\n") == ([], "```\na\n\nb\n\nc\n")
    # Indented continuation of a list item and quote lines after a quote keep the block open.
    assert split_blocks("- a\n\n  more\n\n> q\n\n> r\n\nz\n")[0] == [
        "- a\n\n  more\n\n",
        "> q\n\n> r\n\n",
    ]
    # A fence inside a list item ends with the item, closed or not.
    assert split_blocks("- a\n  ```\n  x\n\nb\n```\nc\n") == (
        ["- a\n  ```\n  x\n\n"],
        "b\n```\nc\n",  # the second fence is open
    )


@settings(max_examples=400, deadline=None)
@given(text=markdownish, cuts=st.lists(st.integers(min_value=0), min_size=1, max_size=6))
def test_split_invariants(text: str, cuts: list[int]) -> None:
    finished, tail = split_blocks(text)
    assert "".join(finished) + tail == text
    assert all(finished)
    for cut in sorted(c % (len(text) + 1) for c in cuts):
        prefix_finished, prefix_tail = split_blocks(text[:cut])
        assert "".join(prefix_finished) + prefix_tail == text[:cut]
        # A block finished for a prefix stays finished, and identical, for the longer text.
        assert finished[: len(prefix_finished)] == prefix_finished


@settings(max_examples=300, deadline=None)
@given(text=markdownish, cut=st.integers(min_value=0), limit=st.integers(min_value=1, max_value=30))
def test_freeze_and_resume_are_stable(text: str, cut: int, limit: int) -> None:
    markdown = limit % 2 == 0
    blocks, tail_start, fence, _ = _segment(text, markdown=markdown, limit=limit)
    prefix = text[: cut % (len(text) + 1)]
    p_blocks, p_tail, p_fence, _ = _segment(prefix, markdown=markdown, limit=limit)
    assert blocks[: len(p_blocks)] == p_blocks
    # Resuming from a prefix's tail gives what a full scan gives.
    r_blocks, r_tail, r_fence, _ = _segment(
        text, markdown=markdown, start=p_tail, fence=p_fence, limit=limit
    )
    assert (p_blocks + r_blocks, r_tail, r_fence) == (blocks, tail_start, fence)
    starts = [b.start for b in blocks] + [tail_start]
    assert starts[0] == 0 and all(b.end == s for b, s in zip(blocks, starts[1:], strict=True))


# Typical model Markdown, in multi-line units, for the fidelity check below.
UNITS = [
    "", "", "", "Paragraph text with *em*", "a second line", "# Heading", "## Sub", "- item",
    "- item\n  continued", "1. one", "2. two", "  - nested", "   para in item",
    "```python\ncode()\n\nmore()\n```", "~~~\nx\n~~~", "- a\n  ```\n  x\n\n  y\n  ```",
    "| a | b |\n|---|---|\n| 1 | 2 |", "> quote", "> quote\n> more", "---", "Setext\n===",
    "$$\nx^2\n$$", "inline $x$ math", "    indented code", "**bold**: value",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(text=st.lists(st.sampled_from(UNITS), max_size=20).map("\n".join))
def test_blocks_render_like_the_whole(text: str) -> None:
    # The split is only useful if rendering the blocks one by one gives the page the whole
    # answer would (exceptions, documented in split_blocks: references, frozen blocks).
    finished, tail = split_blocks(text)
    assert "".join(markdown_to_html(b) for b in [*finished, tail]) == markdown_to_html(text)


def test_long_tail_is_frozen() -> None:
    lines = [f"line {i} of a paragraph that never ends" for i in range(5000)]
    text = "\n".join(lines) + "\n"
    finished, tail = split_blocks(text)
    assert len(tail) <= FREEZE_CHARS + 100
    assert max(len(b) for b in finished) <= FREEZE_CHARS + 100
    code = "```python\n" + "".join(f"x_{i} = {i}  # <tag>\n" for i in range(20000))
    finished, tail = split_blocks(code)
    assert len(tail) <= FREEZE_CHARS + 100 and len(finished) > 10


def test_frozen_code_block_stays_code() -> None:
    code = "```python\n" + "".join(f"x_{i} = '<div>'\n" for i in range(2000)) + "```\nAfter.\n"
    parts = render_parts(make_state(content=code, status="done"))
    answers = [p for p in parts if p.key.startswith("answer-")]
    assert len(answers) > 3
    assert all('<pre class="nito-code' in p.html for p in answers[:-1])
    assert all("<div>" not in p.html.replace('<div class="nito-out', "") for p in answers)
    assert "<p>After.</p>" in answers[-1].html
    assert sum(CODE_STYLESHEET in p.html for p in parts) == 1


# --- the view model ------------------------------------------------------------------------------


def keys(parts: list[Part]) -> list[str]:
    return [p.key for p in parts]


def test_parts_order_and_keys() -> None:
    state = make_state(
        content="# Title\n\nSome text.\n\n```py\nx = 1\n```\nlive tail",
        reasoning="thinking",
        tool_calls=[tool_call(0)],
        error={"code": 502, "message": "Upstream provider disconnected"},
        anomalies=["[role-repeated] role sent twice (event 3)"],
    )
    parts = render_parts(state)
    assert keys(parts) == [
        "status", "reasoning", "answer-0", "answer-1", "answer-2", "answer-3", "tool-0", "error",
    ]  # fmt: skip
    assert [p.final for p in parts if p.key.startswith("answer")] == [True, True, True, False]
    assert "anomalies" not in keys(parts)  # diagnostics wait for the end
    done = render_parts(state, live=False)
    assert keys(done)[-1] == "anomalies"
    assert all(p.final for p in done)
    # The live tail is plain; once finished it is highlighted like the rest.
    live_code = render_parts(make_state(content="```py\nx = 1\n"))[-1]
    assert "nito-hl" not in live_code.html
    assert "nito-hl" in render_parts(make_state(content="```py\nx = 1\n"), live=False)[-1].html


@settings(max_examples=100, deadline=None)
@given(text=markdownish, cut=st.integers(min_value=0))
def test_finished_parts_never_change(text: str, cut: int) -> None:
    prefix = text[: cut % (len(text) + 1)]
    cache = RenderCache()
    before = render_parts(make_state(content=prefix), cache=cache)
    after = {p.key: p for p in render_parts(make_state(content=text), cache=cache)}
    fresh = {p.key: p for p in render_parts(make_state(content=text))}
    assert after == fresh  # the cache changes nothing
    for part in before:
        if part.final and part.key.startswith("answer-"):
            assert after[part.key] == part


def test_status_line() -> None:
    state = make_state(
        status="done",
        model="z-ai/glm-5.2",
        finish_reason="stop",
        usage={
            "prompt_tokens": 14,
            "completion_tokens": 90,
            "completion_tokens_details": {"reasoning_tokens": 30},
            "cost": 0.00012,
        },
    )
    text = status_text(state)
    assert text.startswith("✓ done · z-ai/glm-5.2 · TTFT 0.25 s · 1.25 s total")
    assert "90.0 tok/s (usage)" in text
    assert "finish: stop" in text
    assert "tokens: 14 prompt / 90 completion / 30 reasoning" in text
    assert "cost $0.00012" in text
    assert "10.0 chunks/s" in status_text(make_state())
    zeros = status_text(
        make_state(usage={"prompt_tokens": 0, "completion_tokens": 5, "cost": 2.3e-05})
    )
    assert "tokens: 0 prompt / 5 completion · cost $0.000023" in zeros
    for status, symbol in [("waiting", "⏳"), ("error", "✗"), ("truncated", "⚠"), ("stopped", "■")]:
        assert status_text(make_state(status=status)).startswith(f"{symbol} {status}")


def test_reasoning_window_then_full() -> None:
    reasoning = "".join(f"step {i}. " for i in range(2000))
    live = render_parts(make_state(reasoning=reasoning))[1]
    assert live.key == "reasoning" and "<details open>" in live.html
    assert len(live.html) < WINDOW_CHARS + 1500
    assert f"{len(reasoning) - WINDOW_CHARS:,} earlier characters hidden" in live.text
    answering = render_parts(make_state(reasoning=reasoning, content="Hi"))[1]
    assert "<details>" in answering.html
    done = render_parts(make_state(reasoning=reasoning, content="Hi", status="done"))[1]
    assert reasoning in done.text and "hidden" not in done.text


def test_tool_cards() -> None:
    live = render_parts(make_state(tool_calls=[tool_call(0, arguments='{"ci', valid_json=False)]))
    assert keys(live)[-1] == "tool-0" and "{&quot;ci" in live[-1].html and "⚠" not in live[-1].text
    ok = render_parts(make_state(status="done", tool_calls=[tool_call(0)]))[-1]
    assert '{\n  "city": "Paris"\n}' in ok.text and "get_weather (call_0)" in ok.text
    bad = tool_call(1, arguments='{"city": ', valid_json=False, parsed=None, json_error="EOF")
    broken = render_parts(make_state(status="done", tool_calls=[bad]))[-1]
    assert "not valid JSON: EOF" in broken.text and '{"city": ' in broken.text


def test_error_banner_escaped_under_answer() -> None:
    state = make_state(
        status="error", content="Partial", error={"code": 502, "message": "<b>down</b>"}
    )
    parts = render_parts(state)
    assert keys(parts) == ["status", "answer-0", "error"]
    assert "Error 502: &lt;b&gt;down&lt;/b&gt;" in parts[-1].html
    assert parts[-1].text == "✗ Error 502: <b>down</b>"
    assert "without [DONE]" in render_parts(make_state(status="truncated"))[-1].text


def test_text_and_code_formats() -> None:
    state = make_state(content="a <b>\n\n*c*\n", status="done")
    text_parts = render_parts(state, format="text")
    assert all("<pre" in p.html for p in text_parts[1:])
    assert "&lt;b&gt;" in text_parts[1].html and "<em>" not in "".join(p.html for p in text_parts)
    code = render_parts(
        make_state(content="def f():\n    return '<x>'\n", status="done"), format="code"
    )
    assert 'class="k"' in code[1].html and "&lt;x&gt;" in code[1].html
    fenced = render_parts(make_state(content="```js\nlet a\n```\n", status="done"), format="code")
    assert '<span class="k">let </span>' in fenced[1].html
    with pytest.raises(ValueError, match="format must be"):
        render_parts(state, format="html")


def test_bundles() -> None:
    state = make_state(
        content="Hello *there*\n\n```py\nx = 1\n```\n", status="done", reasoning="hm"
    )
    part = render_parts(state)[0]
    assert bundle(part) == {"text/html": part.html, "text/plain": part.text}
    final = final_bundle(state)
    assert set(final) == {"text/html", "text/plain"}
    assert final["text/html"].count('class="nito-out') == 3
    assert "Hello *there*" in final["text/plain"] and "<em>there</em>" in final["text/html"]
    assert final["text/html"].count(CODE_STYLESHEET) == 1
    # Reference links resolve in the whole-answer bundle.
    refs = make_state(content="See [docs].\n\n[docs]: https://example.com\n", status="done")
    assert 'href="https://example.com"' in final_bundle(refs)["text/html"]


RECORDINGS = sorted((Path(__file__).parent / "data" / "real").glob("*.sse"))


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_real_recordings_render_safely(path: Path) -> None:
    import nito_nb

    stream = nito_nb.read_sse(path.read_bytes())
    for live in (True, False):
        parts = render_parts(stream, live=live)
        assert parts[0].key == "status" and len({p.key for p in parts}) == len(parts)
        for part in parts:
            assert markup_problems(part.html) == [], part.key
    final = final_bundle(stream)
    assert markup_problems(final["text/html"]) == []
    if stream.content:
        assert stream.content.strip()[:40] in final["text/plain"]


def test_refusal_is_shown_as_a_refusal_escaped() -> None:
    state = make_state(content="", refusal="No <b>way</b>", status="done", done=True)
    parts = render_parts(state, live=False)
    (part,) = [p for p in parts if p.key == "refusal"]
    assert "Refusal" in part.html and "No &lt;b&gt;way&lt;/b&gt;" in part.html
    assert part.text == "⊘ Refusal: No <b>way</b>" and part.final
    assert "No &lt;b&gt;way" in final_bundle(state)["text/html"]
    assert [p.key for p in render_parts(make_state(content="x"), live=True)] == [
        "status",
        "answer-0",
    ]


def test_status_line_shows_free_tier_compact_and_escaped() -> None:
    free = {"eligible": True, "plan": "free", "requests_remaining": 41, "daily_limit": 50}
    text = status_text(make_state(status="done", free_tier=free))
    assert text.endswith(
        "free tier: eligible=True, plan=free, requests_remaining=41, daily_limit=50"
    )
    hostile = {"plan": "<img src=x onerror=alert(1)>\nfree", "limits": {"day": 50}}
    [status] = [p for p in render_parts(make_state(free_tier=hostile)) if p.key == "status"]
    assert "<img" not in status.html and "&lt;img" in status.html
    assert '"limits":{"day":50}' in status.text and "\n" not in status.text
    long = status_text(make_state(free_tier={"note": "x" * 1000}))
    assert len(long.partition("free tier: ")[2]) == 160 and long.endswith("…")
    assert "free tier" not in status_text(make_state())


def test_a_long_growing_answer_shows_its_progress_at_the_bottom() -> None:
    # The status line is the first output: under a long answer it is out of view, so the live
    # tail (the last output while the answer grows) carries a footer; finished blocks do not.
    long = "".join(f"Paragraph {i} " + "word " * 40 + "\n\n" for i in range(40)) + "still going"
    assert len(long) > 3000
    state = make_state(content=long, elapsed=42.4, n_chunks=1234)
    parts = render_parts(state)
    assert status_text(state).startswith("● streaming · sim/test · TTFT 0.25 s · 42.40 s so far")
    tail = parts[-1]
    assert tail.key.startswith("answer-") and not tail.final
    assert "nito-progress" in tail.html and "streaming… 42 s · 1,234 chunks so far" in tail.html
    assert "so far" not in tail.text  # the plain text stays the answer's
    assert not any("nito-progress" in p.html for p in parts[:-1])
    assert not any("nito-progress" in p.html for p in render_parts(make_state(content=long[:500])))
    done = render_parts(make_state(content=long, status="done"))
    assert not any("nito-progress" in p.html for p in done)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tokens=st.lists(
        st.tuples(
            hostile_text,
            st.floats(-30, 0) | st.just(float("nan")),
            st.lists(st.tuples(hostile_text, st.floats(-30, 0)), max_size=3),
        ),
        max_size=8,
    ),
    other=hostile_text,
    live=st.booleans(),
    shade=st.booleans(),
)
def test_no_token_or_alternative_makes_markup_in_shaded_choices(
    tokens: list[tuple[str, float, list[tuple[str, float]]]], other: str, live: bool, shade: bool
) -> None:
    # issue 33: a token and its top alternatives are the model's, shown as the shaded answer's
    # text and in its title attribute (quotes and all); a second choice's text in its column.
    from nito_nb._core.choices import Choice
    from nito_nb._render.choices import choices_bundle

    entries = [
        {"token": t, "logprob": p, "top_logprobs": [{"token": a, "logprob": q} for a, q in top]}
        for t, p, top in tokens
    ]
    content = "".join(t for t, _, _ in tokens)
    state = make_state(content=content, status="streaming" if live else "done")
    choices = [Choice(0, content=content, logprobs=entries), Choice(1, content=other, logprobs=[])]
    for shown in (choices, choices[:1]):
        markup = choices_bundle(state, shown, live=live, shade=shade, window=50)["text/html"]
        assert markup_problems(markup) == [], markup


def test_a_shaded_answer_has_a_legend_and_each_tokens_alternatives() -> None:
    from nito_nb._core.choices import Choice
    from nito_nb._render.choices import choices_bundle

    entries = [
        {"token": "Yes", "logprob": -0.01, "top_logprobs": [{"token": "Yes", "logprob": -0.01}]},
        {
            "token": ' "maybe"',
            "logprob": -2.0,
            "top_logprobs": [
                {"token": " no", "logprob": -0.5},
                {"token": ' "maybe"', "logprob": -2.0},
            ],
        },
    ]
    state = make_state(content='Yes "maybe"', status="done")
    page = choices_bundle(state, [Choice(0, content='Yes "maybe"', logprobs=entries)], shade=True)[
        "text/html"
    ]
    assert "token probability" in page  # the legend
    spans = re.findall(
        r'<span style="background-color: rgba\(255, 140, 0, ([0-9.]+)\)[^"]*" title="([^"]*)">([^<]*)</span>',
        page,
    )
    assert [html.unescape(text) for _, _, text in spans] == ["Yes", ' "maybe"']
    (sure, _, _), (unsure, title, _) = spans
    assert float(unsure) > float(sure)  # the less likely token is shaded more
    assert html.unescape(title) == "p = 0.135\n' no': 0.607\n' \"maybe\"': 0.135"
    assert "nito-grid" not in page  # one choice: no grid
