"""The text/plain of a long text: its head and its tail, and one line saying what was left out.

Every output carries ``text/plain`` beside its ``text/html``, for whatever shows no HTML (a
terminal's ``jupyter console``, ``nbconvert --to script``, a program reading the saved
``.ipynb``). Rich outputs do not carry their whole content twice: IPython's
``display(Markdown(x))`` sends a short repr as its text/plain, pandas cuts a long frame's
text/plain to its first and last rows. Carrying the whole answer in both made a long answer's
outputs weigh 2.1 times the answer (its HTML 1.1x, its text 1.0x: ``bench/bench_display.py``,
docs/JUPYTER.md). So a text stays whole up to ``HEAD_CHARS + TAIL_CHARS`` characters; past that,
its text/plain is its first ``HEAD_CHARS``, one line saying how many characters were left out and
where all of them are (the Stream's ``.content``, ``_nito`` after ``%%nito``), and its last
``TAIL_CHARS``. The HTML always shows everything; so do the Stream's fields and a terminal view.

A live view shows an answer in pieces (its blocks, each in the output it was first sent in, never
sent again once finished: ``_display/slots.py``), so the rule is also given per piece (``piece``):
the pieces in the head carry their share of it, those after it carry nothing, and the last one
carries the line and the tail. Read in order, the outputs' text/plain is then ``excerpt``'s.
Pure: no I/O.
"""

from __future__ import annotations

__all__ = ["ANSWER", "HEAD_CHARS", "TAIL_CHARS", "excerpt", "piece"]

#: The characters of a long text's text/plain before and after the line that says what was left
#: out. Together (8,000) about two printed pages: longer than most chat answers, whose text/plain
#: stays whole, enough to tell what a long one says and how it ends; 4% of a 200 KB answer, whose
#: HTML alone is 1.1 times its size.
HEAD_CHARS = 5_000
TAIL_CHARS = 3_000

#: Where all of an answer is, said in the line that replaces its middle.
ANSWER = "the Stream's .content (_nito.content after %%nito)"


def _left_out(count: int, where: str) -> str:
    return f"\n… {count:,} characters left out of this plain text; all of them: {where} …\n"


def piece(
    text: str, start: int, end: int, *, last: bool, growing: bool = False, where: str = ANSWER
) -> str:
    """The text/plain of ``text[start:end]``, one of the pieces (in order, without gaps) that
    ``text`` is shown in: the characters of the head that fall in it; for the ``last`` piece also
    the line saying how many characters were left out and the tail.

    ``growing``: the text is still arriving, and its last piece (a live view's tail) is re-sent at
    every refresh: it then carries no more than its own characters (at most its last
    ``TAIL_CHARS``), without the line, which the final render adds (a paced answer is rendered a
    thousand times a minute).
    """
    head = text[start : min(end, HEAD_CHARS)] if start < HEAD_CHARS else ""
    if not last:
        return head
    if growing:
        return head + text[max(HEAD_CHARS, start, end - TAIL_CHARS) : end]
    keep_from = max(HEAD_CHARS, end - TAIL_CHARS)
    left = keep_from - HEAD_CHARS
    return head + (_left_out(left, where) if left > 0 else "") + text[keep_from:end]


def excerpt(text: str, where: str = ANSWER) -> str:
    """``text`` whole if it is at most ``HEAD_CHARS + TAIL_CHARS`` characters long; else its head,
    the line saying how many characters were left out and where all of them are, and its tail."""
    if len(text) <= HEAD_CHARS + TAIL_CHARS:
        return text
    return piece(text, 0, len(text), last=True, where=where)
