"""Prompt interpolation: allowed lookups filled, everything else verbatim, never raises, except to
refuse a group that would put the API key in the prompt."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nito_nb import ConfigurationError
from nito_nb._interpolate import interpolate


class Frame:
    shape = (3, 4)
    name = "sales"

    @property
    def broken(self) -> Any:
        raise RuntimeError("a property that fails")


class BadStr:
    def __str__(self) -> str:
        raise ValueError("no str")


NS: dict[str, Any] = {
    "topic": "SSE",
    "n": 1234567,
    "ratio": 0.25,
    "df": Frame(),
    "d": {"a": 1, "k:v": 2, ("x", 1): "tuple"},
    "items": [10, 20, 30],
    "text": "hello world",
    "In": ["", "a = 1", "print(a)"],
    "Out": {1: 42},
    "braces": "{topic} {{n}}",
    "bad": BadStr(),
    "calls": [],
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{topic}", "SSE"),
        ("About {topic}.", "About SSE."),
        ("{df.shape}", "(3, 4)"),
        ("{df.shape[0]} rows of {df.name}", "3 rows of sales"),
        ("{items[-1]}", "30"),
        ("{text[:5]}", "hello"),
        ("{text[::-1]}", "dlrow olleh"),
        ('{d["a"]}', "1"),
        ('{d["k:v"]}', "2"),
        ('{d["x", 1]}', "tuple"),
        ("{In[2]}", "print(a)"),
        ("{Out[1]}", "42"),
        ("{n:,}", "1,234,567"),
        ("{ratio:.0%}", "25%"),
        ("{topic!r}", "'SSE'"),
        ("{topic!r:>7}", "  'SSE'"),
        ("{{topic}}", "{topic}"),
        ("{{", "{"),
        ("}}", "}"),
        ("{{{topic}}}", "{SSE}"),
    ],
)
def test_filled(template: str, expected: str) -> None:
    assert interpolate(template, NS) == expected


@pytest.mark.parametrize(
    "template",
    [
        "{unknown}",
        "{topic.nope}",
        "{Out[7]}",
        "{In[99]}",
        "{items[5]}",
        "{k: v for k in x}",
        "{topic: v for v in x}",  # a known name followed by code: not a format spec
        '{"a": {"b": 1}}',
        '{"key": "value"}',
        "function f() { return 1; }",
        "{ topic }",
        "{topic\n}",
        "{}",
        "{len}",  # builtins are not in the namespace: nothing but the user's names
        "{df.__class__}",
        "{df.broken}",
        "{bad}",
        "{topic()}",
        "{calls.append(1)}",
        "{__import__('os').system('echo hi')}",
        "{n + 1}",
        "{items[n]}",  # a subscript must be a literal
        "{topic!x}",
        "{n:,,}",
        "{lambda: 1}",
        "{d[{1}]}",
        "{",
        "}",
        "x { y",
        "{{topic}",
    ],
)
def test_left_verbatim_or_literal(template: str) -> None:
    result = interpolate(template, NS)
    if template == "{{topic}":
        assert result == "{topic}"  # the escape, then a lone closing brace kept
    else:
        assert result == template
    assert NS["calls"] == []


def test_inserted_values_are_not_expanded_again() -> None:
    assert interpolate("{braces}", NS) == "{topic} {{n}}"


def test_code_in_a_prompt_survives() -> None:
    prompt = "Why does {topic} fail here?\n```python\nd = {k: v for k, v in pairs}\nprint(f'{value}')\n```"
    assert interpolate(prompt, NS) == prompt.replace("{topic}", "SSE", 1)


def test_deep_nesting_does_not_raise() -> None:
    assert interpolate("{" * 10000 + "}" * 10000, NS)
    assert interpolate("{" + "a." * 5000 + "b}", {"a": 1}) == "{" + "a." * 5000 + "b}"
    deep = "{" + "items" + "[0]" * 300 + "}"
    assert interpolate(deep, NS) == deep


@settings(max_examples=400, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("{}[]().:!'\"rs,0-9 \nabtopicnItemsxdf_")), max_size=60)
)
def test_never_raises(template: str) -> None:
    interpolate(template, NS)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_text_without_braces_is_unchanged(template: str) -> None:
    template = template.replace("{", "").replace("}", "")
    assert interpolate(template, NS) == template


# -- the API key never goes into a prompt ------------------------------------------------------------

KEY = "sk-or-v1-SECRET0123456789abcdef"


class Holder:
    def __init__(self) -> None:
        self.key = KEY
        self.config = {"model": "m", "api_key": KEY}


SECRET_NS: dict[str, Any] = {
    **NS,
    "env": {"HOME": "/home/me", "NITO_API_KEY": KEY},
    "envb": {b"NITO_API_KEY": KEY.encode()},
    "holder": Holder(),
    "keys": [KEY, "other"],
    "header": f"Authorization: Bearer {KEY}",
}


@pytest.mark.parametrize(
    "template",
    [
        "{env}",
        "{env!r}",
        "{env!a}",
        '{env["NITO_API_KEY"]}',
        '{env["NITO_API_KEY"][::2]}',  # a piece of it is refused too
        '{env["NITO_API_KEY"][-4:]}',
        '{env["NITO_API_KEY"][3]}',
        '{env["NITO_API_KEY"]:.8}',
        '{env["NITO_API_KEY"]:>60}',
        "{envb}",
        '{envb[b"NITO_API_KEY"][:10]}',
        "{holder.key}",
        "{holder.config}",
        "{keys}",
        "{keys[0][1:]}",
        "{header}",
    ],
)
def test_a_group_that_reaches_the_key_is_refused(template: str) -> None:
    with pytest.raises(ConfigurationError, match="API key") as info:
        interpolate(f"Look: {template} and {{topic}}", SECRET_NS, secrets=[KEY])
    message = str(info.value)
    assert template in message and "nothing was sent" in message
    assert not [KEY[i : i + 5] for i in range(len(KEY) - 4) if KEY[i : i + 5] in message]


def test_everything_else_still_fills_with_a_key_configured() -> None:
    # A container that holds the key may be looked into for something else.
    template = '{topic} {env["HOME"]} {holder.config["model"]} {keys[1]} {df.shape[0]}'
    assert interpolate(template, SECRET_NS, secrets=[KEY, None]) == "SSE /home/me m other 3"
    assert interpolate("{env}", SECRET_NS) != "{env}"  # no secret given: nothing to refuse


def test_os_environ_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NITO_API_KEY", KEY)
    namespace = {"os": os}
    for template in ("{os.environ}", '{os.environ["NITO_API_KEY"][1:]}', "{os.environb!r}"):
        with pytest.raises(ConfigurationError):
            interpolate(template, namespace, secrets=[os.environ["NITO_API_KEY"]])
    assert interpolate("{{os.environ}}", namespace, secrets=[KEY]) == "{os.environ}"


def test_a_key_typed_in_a_group_is_not_shown_back() -> None:
    # The group's own text is shown in the refusal: never with the key in it.
    namespace = {"d": {KEY: KEY}}
    with pytest.raises(ConfigurationError) as info:
        interpolate(f'{{d["{KEY}"]}}', namespace, secrets=[KEY])
    assert KEY not in str(info.value) and "[redacted]" in str(info.value)


def test_a_short_placeholder_key_is_not_a_secret() -> None:
    # "EMPTY" or "none", what keyless local servers are given, is no secret to guard.
    assert interpolate("{env}", {"env": {"KEY": "EMPTY"}}, secrets=["EMPTY"]) == "{'KEY': 'EMPTY'}"
