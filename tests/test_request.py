"""The shape of a request's messages (``nito_nb/_core/request.py``): what a caller may pass, and
one clear line saying what was wrong with anything else."""

from __future__ import annotations

import pytest

import nito_nb
from nito_nb._core.request import as_messages


def test_a_string_or_messages_become_the_requests_messages() -> None:
    assert as_messages("hi") == [{"role": "user", "content": "hi"}]
    message = {"role": "user", "content": "hi"}
    assert as_messages(message) == [message] and as_messages((message,)) == [message]


@pytest.mark.parametrize(
    ("prompt", "said"),
    [
        (5, "not int"),
        (None, "not NoneType"),
        # A list said "not list": what in it was wrong, and where several prompts go.
        (
            ["hi", "there"],
            "not a list holding a str ('hi'); for several prompts, one request each, use nito_nb.run",
        ),
        ([{"role": "user", "content": "hi"}, None], "not a list holding a NoneType (None)"),
    ],
)
def test_anything_else_is_one_line_saying_what(prompt: object, said: str) -> None:
    with pytest.raises(nito_nb.ConfigurationError) as caught:
        nito_nb.stream(prompt, model="sim/chat")
    assert str(caught.value).startswith("the prompt must be a string or a list of messages like")
    assert str(caught.value).endswith(said)
