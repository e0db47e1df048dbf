"""Block splitting of a growing answer: the blocks that can no longer change, and the tail.

A live display sends each finished block once and re-sends only a small tail, so traffic stays
linear in the answer length (``split_blocks``; ``_segment`` resumes a scan where the last stopped).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

#: A block without a natural end (no blank line, no closed fence) is frozen at a line boundary once
#: it reaches this many characters, so a long paragraph-free answer never makes the live tail (which
#: is re-sent on every update) grow without bound.
FREEZE_CHARS = 4096

_FENCE_OPEN_RE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_LIST_ITEM_RE = re.compile(r"^(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)")
_SETEXT_RE = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
# what _LIST_ITEM_RE needs one more character for
_MARKER_SO_FAR_RE = re.compile(r"[-+*]|\d{1,9}[.)]?")


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
