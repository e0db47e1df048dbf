"""The simulator's `response_format` over loopback (issue 30, item 8; issue 33's simulator part).

`json_object` makes every model that answers in words answer a JSON object, `json_schema` JSON
that conforms to the schema, the same for the same seed, streamed in small pieces at the usual
pace and merged whole without streaming. The openai SDK's `parse()` (and its stream helper) gets
a valid parsed object; `sim/json-invalid` and `sim/json-cut` break it as a model does, and
`%%nito --json` in a real kernel shows the JSON.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import httpx
import jsonschema
import openai
import pydantic
import pytest
from conftest import execute_cells
from test_sim import QUICK, with_token

import nito_nb
from nito_nb import sim
from nito_nb._core.strict_schema import strict_form

PROMPT = "Classify: you have won a prize, click here."
WORDY = [
    "sim/chat",
    "sim/echo",
    "sim/reasoning",
    "sim/mistral",
    "sim/websearch",
    "sim/free",
    "sim/slow",
]


class Reason(pydantic.BaseModel):
    text: Annotated[str, pydantic.Field(min_length=3, max_length=40)]
    weight: Annotated[int, pydantic.Field(ge=1, le=5)]


class Verdict(pydantic.BaseModel):
    label: Literal["spam", "ham"]
    confidence: Annotated[float, pydantic.Field(ge=0, le=1)]
    reasons: Annotated[list[Reason], pydantic.Field(min_length=1, max_length=3)]
    note: str | None = None


SCHEMA = strict_form(Verdict.model_json_schema())  # as OpenAI's strict mode takes it
JSON_SCHEMA: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {"name": "Verdict", "schema": SCHEMA, "strict": True},
}


@pytest.fixture(scope="module")
def sdk() -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=sim.ensure_server(), api_key=sim.token(), max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.ensure_server(), timeout=60, headers=with_token()) as client:
        yield client


def stream(model: str, response_format: Any, **kwargs: Any) -> nito_nb.Stream:
    s = nito_nb.stream(PROMPT, model=model, sim={**QUICK, **kwargs.pop("sim", {})},
                       response_format=response_format, raise_errors=False, **kwargs)  # fmt: skip
    s.wait()
    return s


def whole(
    http: httpx.Client, model: str, response_format: Any, **sim_options: Any
) -> dict[str, Any]:
    body = {"model": model, "messages": [{"role": "user", "content": PROMPT}], "stream": False,
            "response_format": response_format, "sim": {**QUICK, **sim_options}}  # fmt: skip
    response = http.post("/chat/completions", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def text_of(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, list):  # Mistral's parts
        return "".join(p["text"] for p in content if p["type"] == "text")
    return content


@pytest.mark.parametrize("model", WORDY)
def test_json_object_makes_every_wordy_model_answer_a_json_object(
    http: httpx.Client, model: str
) -> None:
    s = stream(model, {"type": "json_object"})
    assert s.status == "done" and s.finish_reason == "stop"
    value = json.loads(s.content)
    assert isinstance(value, dict) and isinstance(value["answer"], str) and value["answer"]
    assert 0 <= value["confidence"] <= 1 and 1 <= len(value["topics"]) <= 3
    if model == "sim/echo":
        assert value["answer"] == PROMPT
    (choice,) = whole(http, model, {"type": "json_object"})["choices"]
    assert json.loads(text_of(choice["message"])) == value  # the same seed: the same object


@pytest.mark.parametrize("model", WORDY)
def test_json_schema_makes_every_wordy_model_answer_json_that_conforms(
    http: httpx.Client, model: str
) -> None:
    s = stream(model, JSON_SCHEMA)
    value = json.loads(s.content)
    jsonschema.validate(value, SCHEMA)
    Verdict.model_validate(value)
    (choice,) = whole(http, model, JSON_SCHEMA)["choices"]
    assert json.loads(text_of(choice["message"])) == value
    if model in ("sim/reasoning", "sim/mistral"):
        assert s.reasoning  # the reasoning comes first, as before; the answer is the JSON


def test_the_json_is_deterministic_per_seed_and_each_choice_has_its_own(http: httpx.Client) -> None:
    one = stream("sim/chat", JSON_SCHEMA, sim={"seed": 5}).content
    assert stream("sim/chat", JSON_SCHEMA, sim={"seed": 5}).content == one
    assert stream("sim/chat", JSON_SCHEMA, sim={"seed": 6}).content != one
    choices = whole(http, "sim/chat", JSON_SCHEMA, seed=5)["choices"]
    assert len(choices) == 1 and choices[0]["message"]["content"] == one
    body = {"model": "sim/chat", "messages": [{"role": "user", "content": PROMPT}], "stream": False, "n": 3,
            "response_format": JSON_SCHEMA, "sim": {**QUICK, "seed": 5}}  # fmt: skip
    texts = [
        c["message"]["content"] for c in http.post("/chat/completions", json=body).json()["choices"]
    ]
    assert texts[0] == one and len(set(texts)) == 3
    for text in texts:
        Verdict.model_validate_json(text)


def test_the_json_streams_in_small_pieces_at_the_usual_pace() -> None:
    s = nito_nb.stream(PROMPT, model="sim/chat", response_format=JSON_SCHEMA,
                       sim={"tps": 200, "ttft_ms": 0, "jitter": 0})  # fmt: skip
    t0 = time.perf_counter()
    s.wait()
    pieces = [c["choices"][0]["delta"].get("content") for c in (e.chunk for e in s.log if e.kind == "chunk")
              if c and c["choices"]]  # fmt: skip
    pieces = [p for p in pieces if p]
    Verdict.model_validate_json(s.content)
    assert "".join(pieces) == s.content and len(pieces) >= 10
    assert max(len(p.strip()) for p in pieces) <= 7
    # 200 tokens a second: the last piece comes about len(pieces) / 200 s after the first.
    assert time.perf_counter() - t0 >= 0.8 * (len(pieces) - 1) / 200
    assert s.usage["completion_tokens"] == len(pieces)


def test_the_sdks_parse_gets_a_valid_object(sdk: openai.OpenAI) -> None:
    for model in ("sim/chat", "sim/reasoning", "sim/echo"):
        completion = sdk.chat.completions.parse(
            model=model,
            messages=[{"role": "user", "content": PROMPT}],
            response_format=Verdict,
            extra_body={"sim": QUICK},
        )
        parsed = completion.choices[0].message.parsed
        assert isinstance(parsed, Verdict) and parsed.label in ("spam", "ham")


def test_the_sdks_stream_helper_sees_a_partial_object_grow_and_parses_it(
    sdk: openai.OpenAI,
) -> None:
    partial: list[str] = []
    with sdk.chat.completions.stream(
        model="sim/chat",
        messages=[{"role": "user", "content": PROMPT}],
        response_format=Verdict,
        extra_body={"sim": QUICK},
    ) as events:
        for event in events:
            if event.type == "content.delta" and event.parsed is not None:
                partial.append(json.dumps(event.parsed, sort_keys=True))
        final = events.get_final_completion()
    parsed = final.choices[0].message.parsed
    assert isinstance(parsed, Verdict)
    assert len(set(partial)) >= 5  # the object grew field by field
    assert json.loads(partial[-1]) == json.loads(final.choices[0].message.content or "")


def test_json_invalid_breaks_the_schema_and_without_one_the_syntax(
    http: httpx.Client, sdk: openai.OpenAI
) -> None:
    s = stream("sim/json-invalid", JSON_SCHEMA)
    value = json.loads(s.content)  # JSON, but not what the schema asks for
    assert s.status == "done" and s.finish_reason == "stop"
    assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(value))
    with pytest.raises(pydantic.ValidationError):
        sdk.chat.completions.parse(model="sim/json-invalid", messages=[{"role": "user", "content": PROMPT}],
                                   response_format=Verdict, extra_body={"sim": QUICK})  # fmt: skip
    for response_format in ({"type": "json_object"}, None):
        broken = stream("sim/json-invalid", response_format).content
        with pytest.raises(ValueError):
            json.loads(broken)
    (choice,) = whole(http, "sim/json-invalid", JSON_SCHEMA)["choices"]
    assert json.loads(choice["message"]["content"]) == value


def test_json_cut_stops_mid_object_with_finish_reason_length(
    http: httpx.Client, sdk: openai.OpenAI
) -> None:
    s = stream("sim/json-cut", JSON_SCHEMA)
    assert s.status == "done" and s.finish_reason == "length"
    full = stream("sim/chat", JSON_SCHEMA).content  # the same seed: the object it was cutting
    assert full.startswith(s.content) and len(s.content) < len(full) and s.content.startswith("{")
    with pytest.raises(ValueError):
        json.loads(s.content)
    (choice,) = whole(http, "sim/json-cut", JSON_SCHEMA)["choices"]
    assert choice["message"]["content"] == s.content and choice["finish_reason"] == "length"
    with pytest.raises(openai.LengthFinishReasonError):
        sdk.chat.completions.parse(model="sim/json-cut", messages=[{"role": "user", "content": PROMPT}],
                                   response_format=Verdict, extra_body={"sim": QUICK})  # fmt: skip
    cut = stream("sim/json-cut", None).content  # no schema: the answer object, cut
    assert cut.startswith('{"answer": "## ')
    with pytest.raises(ValueError):
        json.loads(cut)


@pytest.mark.parametrize(
    ("response_format", "says"),
    [
        ({"type": "xml"}, "`response_format.type` must be"),
        ({"type": "json_schema"}, "`response_format.json_schema` is required"),
        ({"type": "json_schema", "json_schema": {"schema": SCHEMA}}, "json_schema.name"),
        (
            {
                "type": "json_schema",
                "json_schema": {"name": "v", "schema": {"$ref": "#/$defs/Gone"}},
            },
            "names nothing",
        ),
        (
            {
                "type": "json_schema",
                "json_schema": {
                    "name": "v",
                    "schema": {
                        "type": "object",
                        "properties": {"me": {"$ref": "#"}},
                        "required": ["me"],
                    },
                },
            },
            "no finite",
        ),
    ],
)
def test_a_response_format_it_cannot_answer_is_a_400_that_says_why(
    response_format: Any, says: str
) -> None:
    with pytest.raises(nito_nb.BadRequestError, match=f"HTTP 400: .*{says}") as caught:
        nito_nb.stream(PROMPT, model="sim/chat", sim=QUICK, response_format=response_format)
    assert "\n" not in str(caught.value)


def test_a_response_format_that_is_not_an_object_is_a_400(http: httpx.Client) -> None:
    # (nito_nb's client refuses it before sending: another client's request reaches the simulator)
    body = {
        "model": "sim/chat",
        "messages": [{"role": "user", "content": PROMPT}],
        "response_format": "json",
    }
    response = http.post("/chat/completions", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(
        "`response_format` must be an object such as"
    )


def test_text_and_no_response_format_answer_prose() -> None:
    assert stream("sim/chat", {"type": "text"}).content == stream("sim/chat", None).content
    assert stream("sim/chat", None).content.startswith("## ")


@pytest.mark.slow
@pytest.mark.spawns
def test_nito_json_in_a_kernel_shows_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NITO_SIM_TPS", "0")
    monkeypatch.setenv("NITO_SIM_TTFT_MS", "0")
    nb = execute_cells(
        [
            "%load_ext nito_nb",
            "%%nito -m sim/chat --json\nClassify this email: spam or ham?",
            "import json\nprint(sorted(json.loads(_nito.content)), _nito.request['params']['response_format'])",
        ],
        tmp_path,
    )
    shown = "".join(str(o.get("data", {}).get("text/plain", "")) for o in nb.cells[1].outputs)
    assert '{"answer": ' in shown and "✓ done" in shown
    (printed,) = nb.cells[2].outputs
    assert printed["text"].strip() == "['answer', 'confidence', 'topics'] {'type': 'json_object'}"
