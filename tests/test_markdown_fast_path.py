"""The one-paragraph fast path of ``markdown_to_html`` gives markdown-it's own HTML.

A block that is one paragraph and nothing else is rendered by markdown-it's inline pass alone
(``_render/markdown.py`` ``_one_paragraph``): the HTML must be what the whole parser gives, on
generated text that tries every way a line can start a block, and on the answers the tests and
the simulator use.
"""

from __future__ import annotations

from display_samples import sample_answer
from hypothesis import given, settings
from hypothesis import strategies as st

from nito_nb._render import markdown as markdown_module
from nito_nb._render import markdown_to_html
from nito_nb._render.blocks import _segment
from nito_nb.sim import _texts


def the_long_way(text: str, highlight: bool = True) -> str:
    linkable = "//" in text or "@" in text
    return markdown_module._MD[highlight, linkable].render(text)


# How a line may start: block markers, near misses of them, and plain words.
STARTS = [
    "", " ", "   ", "    ", "\t", "**", "***", "* ", "*a", "- ", "-", "---", "+ ", "1. ", "1) ",
    "2. ", "12.", "3D ", "2024 ", "# ", "#a", "> ", "```", "~~~", "$$", "$", "[a]: /x", "[a]",
    "=", "===", "| ", "a | b", "<div>", "<b>", "&amp;", "\\", "_", "__a", "`", "```py", ":--",
    "\u00a0", "\u202e", "\u00e9", "\u0301", "Word", "word", "http://x.org ", "a@b.co ", "!",
]  # fmt: skip
WORDS = [
    "word", " ", "  ", "**b**", "*e*", "_u_", "`c`", "~~s~~", "[l](http://x.org)", "[r][a]",
    "![i](http://x.org/i.png)", "<b>x</b>", "&", "&amp;", '"q"', "'", "\\*", "\\", "$x$", "$5",
    "| ", "http://x.org", "www.x.org", "a@b.co", "  \n", "\\\n", "\u00a0", "\x00", "\r", "<http://x.org>",
    "**", "**.", ".**", " **", "\u2026**", "\u00e9**",
]  # fmt: skip

line = st.tuples(st.sampled_from(STARTS), st.lists(st.sampled_from(WORDS), max_size=6)).map(
    lambda t: t[0] + "".join(t[1])
)
block = st.tuples(
    st.lists(line, min_size=1, max_size=5), st.sampled_from(["", "\n", "\n\n", "\n \n", "\n\n\n"])
).map(lambda t: "\n".join(t[0]) + t[1])


@settings(max_examples=3000, deadline=None)
@given(block, st.booleans())
def test_the_fast_path_gives_markdown_its_own_html(text: str, highlight: bool) -> None:
    assert markdown_to_html(text, highlight=highlight) == the_long_way(text, highlight)


@settings(max_examples=1000, deadline=None)
@given(st.text(max_size=80), st.booleans())
def test_any_text_gives_the_same_html(text: str, highlight: bool) -> None:
    assert markdown_to_html(text, highlight=highlight) == the_long_way(text, highlight)


def answers() -> list[str]:
    texts = [sample_answer(60_000), "".join(_texts.long_fragments(3))]
    for value in vars(_texts).values():
        if isinstance(value, str) and len(value) > 20:
            texts.append(value)
        elif isinstance(value, tuple):
            texts.extend(v for v in value if isinstance(v, str))
    return texts


def test_every_block_of_the_sample_answers_renders_alike() -> None:
    taken = total = 0
    for answer in answers():
        for found in _segment(answer, markdown=True).blocks:
            text = answer[found.start : found.end]
            total += 1
            taken += markdown_module._one_paragraph(text) is not None
            assert markdown_to_html(text) == the_long_way(text), text
    # The fast path is taken where it should be: many blocks of these answers are paragraphs.
    assert total > 200 and taken > total / 4, (taken, total)


def test_what_the_fast_path_leaves_to_markdown_it() -> None:
    for text in [
        "- item\n", "1. item\n", "2) item\n", "# Title\n", "> quote\n", "```\ncode\n```\n",
        "    code\n", "Title\n===\n", "Title\n---\n", "a | b\n--|--\n", "[a]: http://x.org\n",
        "$$\nx\n$$\n", "one\n\ntwo\n", "word\ttab\n", "*a*\n", "bidi \u202e\n",
    ]:  # fmt: skip
        assert markdown_module._one_paragraph(text) is None, text
        assert markdown_to_html(text) == the_long_way(text)
    for text in [
        'Plain "quoted" words\n   and more\n\n', "One line.", "Caf\u00e9 3D 2024 it's\n",
        "**Part 1.**\n\n", "  **a b**", "**a **\n", "**a** b", "**a*b**", "**\u00e9\u2026**",
        "**1)**", "**a.**.", "**a**\n**b**", "**a\u00a0**", "**a\u3000**", '**"q"**', "****",
    ]:  # fmt: skip
        assert markdown_to_html(text) == the_long_way(text)
    assert markdown_module._one_paragraph(" A **b** `c` [d](http://x.org).\n  e\n\n") == (
        "A **b** `c` [d](http://x.org).\n  e"
    )
