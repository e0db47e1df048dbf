"""Text as it may be printed: the one rule for control characters in what nito_nb shows as text.

A server decides what its error bodies, error chunks, model names and answers hold. Printed as
they are, control characters act on whatever shows them: ``ESC [ 2 J`` clears a terminal,
``ESC ] 8 ;;`` makes a hidden link, ``ESC ] 52`` writes the clipboard in some terminals, BEL rings,
a carriage return or backspaces overwrite what was printed before (a fake "✓ done"), the C1
``\\x9b`` is a one-byte ``ESC [``, and a right-to-left override (U+202E) reverses the rest of the
line. JupyterLab reads ANSI escapes in ``text/plain`` and in stderr too (it colours them).

:func:`printable` shows each such character as its escape (``\\x1b``, ``\\x0d``, ``\\x9b``,
``\\u202e``) instead. Why that form rather than the Control Pictures (U+241B ␛): those exist for
C0 and DEL only, not for C1 or the bidi controls, so one notation covers all; it is ASCII, so it
survives any terminal's encoding; and it is how a Python string literal writes the character (as
``repr`` does, but for the few it names, ``\\r``), so the reader can tell which one the server
sent and search for it.

It is applied where text leaves for a terminal or a ``text/plain`` output (error messages, the
one-line errors, a Stream's repr, the plain text of the view, the terminal sink, the status line),
never to the data a Stream keeps (``content`` stays what the model sent). HTML outputs escape
markup; the renderer puts the gateway's error text through this rule there too.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

#: The characters shown as escapes: C0 controls but tab and line feed (which text/plain and a
#: terminal show as layout), DEL, the C1 controls, and the bidi embeddings, overrides and isolates
#: (U+202A-U+202E, U+2066-U+2069), which reorder a run of text. The bidi marks (U+200E, U+200F,
#: U+061C) stay: they reorder nothing beyond their neighbours, and right-to-left text uses them.
#: A carriage return is shown too, also before a line feed: the rule then looks at one character
#: at a time, so text printed in pieces (the terminal sink, a live view's blocks) shows the same
#: as printed whole, wherever a piece ends; a ``\r\n`` in an answer is rare, a lone one overwrites.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character that would act on a terminal or reorder the line
    shown as its escape (``\\x1b``); the rest, line feeds and tabs included, as it is. Idempotent
    (what it returns holds no such character), and character by character:
    ``printable(a + b) == printable(a) + printable(b)``."""
    if _CONTROL.search(text) is None:  # the usual case: no copy
        return text
    return _CONTROL.sub(_escape, text)
