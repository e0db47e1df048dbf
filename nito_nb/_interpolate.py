"""Interpolation of a prompt: ``{name}``, ``{obj.attr}``, ``{In[3]}`` filled from a namespace.

Pure: no I/O, no globals. A prompt is not a program, so nothing in it is ``eval``-ed:
the text between braces is parsed with ``ast`` and only an allowlist is evaluated by walking the
tree by hand:

- a name from the namespace: ``{topic}`` (never a builtin: ``{len}`` stays as it is);
- attribute access: ``{df.shape}`` (no dunder attributes: ``{x.__class__}`` stays);
- subscripts with literal keys: ``{In[3]}``, ``{Out[-1]}``, ``{d["key"]}``, ``{text[:200]}``,
  ``{df.shape[0]}``;
- then optionally a conversion and a format spec, as in ``str.format``: ``{x!r}``, ``{n:,}``,
  ``{ratio:.1%}`` (the spec must be a standard one).

Anything else is left verbatim, braces included: unknown names, code (``{k: v for k in x}``,
``function() { return 1; }``), JSON objects, and any lookup or formatting that fails. ``{{`` and
``}}`` outside such a group become ``{`` and ``}``. One pass: inserted values are never expanded
again, whatever braces they contain.

The one error: a group whose lookup passes through the API key (given as ``secrets``) raises
:class:`~nito_nb.ConfigurationError`, so that ``{os.environ}`` cannot send the key to a model and
show it in the output. "Passes through" means the value, or any text met on the way to it, holds
the key in one of the forms the redaction rule knows (``_core.errors.redact``): a slice or a format
spec cannot take a piece of it out either (``{os.environ["NITO_API_KEY"][::2]}``). Keys shorter
than ``MIN_SECRET_LENGTH`` are placeholders, not secrets, and are not looked for.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ._core.errors import ConfigurationError, Secret, redact

__all__ = ["interpolate"]

#: Longer brace groups are not looked at (a name or a short path is all that is allowed).
_MAX_EXPRESSION = 200
_FORMAT_SPEC = re.compile(
    r"(?:.?[<>=^])?[+\- ]?z?#?0?\d*[_,]?(?:\.\d+)?[bcdeEfFgGnosxX%]?", re.DOTALL
)


class _NotAllowed(Exception):
    """The group is not an allowed expression, or its value cannot be had: keep it verbatim."""


class _Secret(Exception):
    """The group's lookup reached the key: refuse the whole prompt (private: no object of the
    user's can raise it, so it is never mistaken for a failing property)."""


def interpolate(
    text: str, namespace: Mapping[str, Any], *, secrets: Iterable[str | None] = ()
) -> str:
    """``text`` with each allowed ``{...}`` replaced by its value from ``namespace`` (see the module).

    Whatever cannot be filled is kept as written. Raises ConfigurationError, and only then, when a
    group would put one of ``secrets`` (the API key) into the text.
    """
    guards = tuple(secret for secret in map(Secret.of, secrets) if secret is not None)
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        brace = _next_brace(text, i)
        if brace < 0:
            out.append(text[i:])
            break
        out.append(text[i:brace])
        char = text[brace]
        if brace + 1 < n and text[brace + 1] == char:  # "{{" or "}}": one literal brace
            out.append(char)
            i = brace + 2
            continue
        if char == "}":  # a lone closing brace: keep it
            out.append(char)
            i = brace + 1
            continue
        end = _matching(text, brace)
        if end < 0:  # never closed: the rest is plain text
            out.append(text[brace:])
            break
        group = text[brace : end + 1]
        try:
            out.append(_fill(group[1:-1], namespace, group, guards))
        except _Secret:
            shown = group if len(group) <= 60 else group[:57] + "..."
            for secret in guards:
                shown = redact(shown, secret)
            raise ConfigurationError(
                f"{shown} would put the API key into the prompt, so nothing was sent: take it out "
                "of the prompt (or double its braces, {{...}}, to send them as text)."
            ) from None
        i = end + 1
    return "".join(out)


def _next_brace(text: str, start: int) -> int:
    opening, closing = text.find("{", start), text.find("}", start)
    if opening < 0:
        return closing
    if closing < 0:
        return opening
    return min(opening, closing)


def _matching(text: str, start: int) -> int:
    """Index of the brace closing the one at ``start`` (nesting counted), or -1."""
    depth = 0
    for index in range(start, len(text)):
        char = text[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return -1


def _fill(
    inner: str, namespace: Mapping[str, Any], verbatim: str, guards: tuple[Secret, ...] = ()
) -> str:
    # Surrounding spaces, nested braces and newlines mark code, not a slot: `{ return x; }`.
    if (
        not inner
        or len(inner) > _MAX_EXPRESSION
        or inner != inner.strip()
        or "{" in inner
        or "\n" in inner
    ):
        return verbatim
    try:
        expr, conversion, spec = _split(inner)
        if conversion not in (None, "r", "s", "a"):
            return verbatim
        if spec is not None and not _FORMAT_SPEC.fullmatch(spec):
            return verbatim
        tree = ast.parse(expr, mode="eval")
        value = _evaluate(tree.body, namespace, guards)
        if conversion == "r":
            value = repr(value)
        elif conversion == "a":
            value = ascii(value)
        filled = format(value, spec or "") if spec is not None else str(value)
        _guard(filled, guards)
        return filled
    except _Secret:
        raise
    except _NotAllowed:
        return verbatim
    except Exception:  # a failing property, __str__ or __format__ of the user's own object
        return verbatim


def _split(inner: str) -> tuple[str, str | None, str | None]:
    """(expression, conversion, format spec): split at the first ``!`` or ``:`` outside brackets
    and quotes, as ``str.format`` does, so ``{text[:200]}`` keeps its slice."""
    depth, quote = 0, ""
    for index, char in enumerate(inner):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif depth == 0 and char in "!:":
            expr, rest = inner[:index], inner[index:]
            if char == ":":
                return expr, None, rest[1:]
            conversion, colon, spec = rest[1:].partition(":")
            return expr, conversion, spec if colon else None
    return inner, None, None


def _evaluate(node: ast.expr, namespace: Mapping[str, Any], guards: tuple[Secret, ...] = ()) -> Any:
    if isinstance(node, ast.Name):
        if node.id not in namespace:
            raise _NotAllowed(node.id)
        value = namespace[node.id]
    elif isinstance(node, ast.Attribute):
        if node.attr.startswith("__"):
            raise _NotAllowed(node.attr)
        value = getattr(_evaluate(node.value, namespace, guards), node.attr)
    elif isinstance(node, ast.Subscript):
        value = _evaluate(node.value, namespace, guards)[_key(node.slice)]
    else:
        raise _NotAllowed(type(node).__name__)
    # Text met on the way counts, not only the result: a slice or an index of the key is a piece
    # of it. (Other values are looked at once formatted, by _fill.)
    if isinstance(value, (str, bytes, bytearray)):
        _guard(value, guards)
    return value


def _guard(value: str | bytes | bytearray, guards: tuple[Secret, ...]) -> None:
    if any(secret.found_in(value) for secret in guards):
        raise _Secret


def _key(node: ast.expr) -> Any:
    """A literal subscript: a constant, a negative number, a slice of those, or a tuple of those."""
    if isinstance(node, ast.Constant) and isinstance(
        node.value, (int, str, bytes, bool, type(None))
    ):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
    ):
        return -node.operand.value
    if isinstance(node, ast.Slice):
        parts = [None if p is None else _key(p) for p in (node.lower, node.upper, node.step)]
        return slice(*parts)
    if isinstance(node, ast.Tuple):
        return tuple(_key(element) for element in node.elts)
    raise _NotAllowed(type(node).__name__)
