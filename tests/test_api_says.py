"""Issue 30, the Python API's side: say what happened. A stream that broke is never half an answer
in silence, a misspelt keyword is never sent as a body field, and a mistake is one line that says
what to do. On the embedded simulator and small loopback servers of the tests' own.
"""

from __future__ import annotations

from typing import Any

import pytest

import nito_nb

# -- 1. the result of a broken stream that nobody iterated or waited for ------------------------------

RESULTS = (
    "content",
    "reasoning",
    "reasoning_details",
    "refusal",
    "audio",
    "audio_transcript",
    "tool_calls",
    "finish_reason",
    "usage",
    "message",
    "messages",
    "logprobs",
    "choices",
)


@pytest.mark.parametrize("name", RESULTS)
@pytest.mark.parametrize(
    ("model", "error"),
    [("sim/error-midstream", nito_nb.MidStreamError), ("sim/drop", nito_nb.StreamError)],
)
def test_a_result_of_a_broken_stream_raises_what_wait_raises(
    model: str, error: type, name: str
) -> None:
    s = nito_nb.stream("hi", model=model, sim={"seed": 1})
    with pytest.raises(error) as raised:
        getattr(s, name)
    assert raised.value is s.exception and raised.value.stream is s
    # Told once, as after wait(): the partial answer is then read as it is, on the Stream and the error.
    assert len(s.content) > 100 and raised.value.stream.content == s.content
    assert s.status in ("error", "truncated")


def test_how_the_call_went_never_raises_and_does_not_count_as_reading_the_answer() -> None:
    s = nito_nb.stream("hi", model="sim/error-midstream")
    assert s.error is not None and isinstance(s.anomalies, list) and s.status == "error"
    assert "text/plain" in s._repr_mimebundle_()  # shown, not read: the display says "error"
    # the pandas adapter reads the log, never raises
    assert "error" in set(nito_nb.frame(s)["status"])
    with pytest.raises(nito_nb.MidStreamError):
        _ = s.content


def test_raise_errors_false_and_a_whole_answer_read_as_they_are() -> None:
    assert len(nito_nb.stream("hi", model="sim/drop", raise_errors=False).content) > 100
    assert nito_nb.stream("hi", model="sim/echo").content == "hi"


def test_an_on_done_callback_reads_the_partial_answer_and_the_caller_is_still_told() -> None:
    seen: list[int] = []
    s = nito_nb.stream("hi", model="sim/error-midstream").on_done(
        lambda st: seen.append(len(st.content))
    )
    with pytest.raises(nito_nb.MidStreamError):
        s.wait()
    assert seen and seen[0] == len(s.content) > 100


def test_the_magic_and_a_run_read_broken_streams_without_raising(ip: Any) -> None:
    ip.run_cell_magic("nito", "-m sim/error-midstream", "hi")
    assert nito_nb.last().status == "error" and len(nito_nb.last().content) > 100
    results = nito_nb.run(["a", "b"], model="sim/drop", progress=False).wait().results()
    assert list(results["status"]) == ["truncated"] * 2 and all(results["content"].str.len() > 100)


# -- 2. a misspelt keyword is refused with "Did you mean", a field of the gateway's own is sent --------------


@pytest.mark.parametrize(
    ("call", "meant"),
    [
        (lambda: nito_nb.stream("hi", model="sim/echo", temprature=0.2), "temperature="),
        (lambda: nito_nb.astream("hi", model="sim/echo", max_token=5), "max_tokens="),
        (lambda: nito_nb.stream("hi", model="sim/echo", raise_error=False), "raise_errors="),
        (lambda: nito_nb.run(["x"], model="sim/echo", concurency=4), "concurrency="),
        (lambda: nito_nb.map(["x"], model="sim/echo", concurency=4), "concurrency="),
        (
            lambda: nito_nb.sweep(["x"], model="sim/echo", rates=[1], duration=1, warmpu=1),
            "warmup=",
        ),
    ],
)
def test_a_misspelt_keyword_is_refused_before_anything_is_sent(call: Any, meant: str) -> None:
    with pytest.raises(nito_nb.ConfigurationError, match=f"Did you mean {meant}") as raised:
        call()
    assert "\n" not in str(raised.value)


def test_the_one_rule_of_a_slip() -> None:
    from nito_nb._core.spelling import distance, meant

    assert distance("tmeperature", "temperature") == 1  # a swap of two neighbours is one edit
    assert meant("--max_tokens", ["--max-tokens"]) == "--max-tokens"  # dashes and case are free
    assert meant("seeds", ["seed"]) == "seed" and meant("sedd", ["seed"]) == "seed"
    assert meant("top", ["top_p"]) is None  # three characters: too short to guess at
    assert meant("nprobs", ["logprobs"]) is None  # difflib's 0.6 ratio would take it
    assert meant("temperature", ["temperature", "temperatures"]) is None  # known: nothing to say


def test_a_misspelt_keyword_of_the_chat_widget_is_refused() -> None:
    with pytest.raises(nito_nb.ConfigurationError, match="Did you mean temperature="):
        nito_nb.ChatWidget(model="sim/echo", temprature=0.2)


def test_a_field_of_the_gateways_own_is_sent_as_it_is() -> None:
    fields = {"my_gateway_field": 1, "top_k": 3, "min_tokens": 2, "n_probs": 2, "top_a": 0.1}
    s = nito_nb.stream("hi", model="sim/echo", **fields).wait()
    assert s.request["params"] == fields and s.status == "done"


def test_the_magic_s_param_and_settings_say_did_you_mean(
    ip: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="Did you mean temperature="):
        ip.run_cell_magic("nito", "-m sim/echo --param temprature=0.2", "hi")
    with caplog.at_level("ERROR"):
        ip.run_line_magic("config", "Nito.params = {'temprature': 0.2}")
    [record] = caplog.records
    assert record.getMessage() == (
        "Nito.params: no option or request field is named temprature=. "
        "Did you mean temperature=? The setting is unchanged."
    )


# -- 11. Python functions as tools= of stream, astream and run, by the one public builder -----------------


def get_weather(city: str, unit: str = "C") -> str:
    """The weather in a city.

    Not in the description: only the first paragraph is."""
    return f"sunny in {city}"


def test_stream_astream_and_run_take_python_functions_as_tools() -> None:
    import asyncio

    expected = [nito_nb.tools.schema(get_weather)]
    assert expected[0]["function"]["description"] == "The weather in a city."
    # one builder: the magic's and widget's
    assert expected == nito_nb.tools.tool_schemas([get_weather])
    s = nito_nb.stream("weather in Paris?", model="sim/tools", tools=[get_weather]).wait()
    assert s.request["params"]["tools"] == expected and s.tool_calls[0].name == "get_weather"

    async def follow() -> Any:
        return await nito_nb.astream("weather?", model="sim/tools", tools=[get_weather]).wait()

    assert asyncio.run(follow()).request["params"]["tools"] == expected
    results = (
        nito_nb.run(["weather?"], model="sim/tools", tools=[get_weather], progress=False)
        .wait()
        .results()
    )
    assert list(results["status"]) == ["done"] and list(results["n_tool_calls"]) == [1]


def test_a_tool_that_is_neither_a_function_nor_a_schema_is_one_line() -> None:
    with pytest.raises(nito_nb.ConfigurationError, match="give a function, or a dict like"):
        nito_nb.stream("x", model="sim/echo", tools=["get_weather"])


# -- 10. model= that is not one model id: say what is accepted ----------------------------------------------


def test_stream_given_a_list_of_models_says_it_takes_one_and_where_several_go() -> None:
    with pytest.raises(nito_nb.ConfigurationError) as raised:
        nito_nb.stream("hi", model=["sim/echo"])
    message = str(raised.value)
    assert "required" not in message and "not ['sim/echo']" in message and "nito_nb.run(" in message


def test_the_chat_widget_given_a_list_of_models_says_how_to_offer_several() -> None:
    with pytest.raises(nito_nb.ConfigurationError, match=r"one model id.*models=\["):
        nito_nb.ChatWidget(model=["sim/echo", "sim/chat"])


# -- 12. a base URL that is not the API's root: say what one looks like --------------------------------------


def test_a_base_url_ending_in_chat_completions_is_refused_up_front() -> None:
    from nito_nb.sim import ensure_server, token

    url = ensure_server() + "/chat/completions"
    for call in (
        lambda: nito_nb.Client(base_url=url),
        lambda: nito_nb.stream("hi", model="x", base_url=url, api_key=token()),
    ):
        with pytest.raises(nito_nb.ConfigurationError) as raised:
            call()
        assert "ends in /chat/completions" in str(raised.value) and '"https://host/v1"' in str(
            raised.value
        )


def test_a_404_from_a_base_url_without_v1_says_what_the_base_url_looks_like() -> None:
    from nito_nb.sim import ensure_server, token

    root = ensure_server().rsplit("/v1", 1)[0]  # the simulator's root answers 404 "Not Found"
    with pytest.raises(nito_nb.NotFoundError) as raised:
        nito_nb.stream("hi", model="sim/echo", base_url=root, api_key=token())
    message = str(raised.value)
    assert message.startswith("HTTP 404: Not Found. Check the model name")
    assert 'usually ending in /v1, like "https://host/v1"' in message and "\n" not in message


# -- 9. the usage counts an answer that never arrived ------------------------------------------------------


def _answer_dropped_by_a_proxy(usage: dict[str, Any]) -> list[bytes]:
    """What LiteLLM forwards of Mistral's list content: the role, the finish, the usage, no text."""
    import json

    from conftest import chunk_line

    return [
        chunk_line({"role": "assistant", "content": ""}),
        chunk_line({}, finish="stop"),
        b'data: {"id":"gen-1","choices":[],"usage":' + json.dumps(usage).encode() + b"}\n\n",
        b"data: [DONE]\n\n",
    ]


def test_usage_without_text_is_an_anomaly_on_the_status_line(scripted: Any) -> None:
    from conftest import open_client
    from scripted_server import Script

    from nito_nb._render.status_line import status_text

    usage = {"prompt_tokens": 9, "completion_tokens": 116, "total_tokens": 125}
    base = scripted.add("usage-without-text", Script(parts=_answer_dropped_by_a_proxy(usage)))
    s = open_client(base).stream("hi", model="mistral").wait()
    assert s.status == "done" and s.content == ""
    assert [a.kind for a in s.anomalies] == ["usage-without-text"]
    assert "116 completion tokens" in str(s.anomalies[0])
    assert "⚠ no text arrived" in status_text(s.snapshot())
    assert "⚠ no text arrived" in s._repr_mimebundle_()["text/plain"]


def test_hidden_reasoning_tokens_and_a_real_answer_are_no_anomaly(scripted: Any) -> None:
    from conftest import open_client
    from scripted_server import Script

    hidden = {
        "prompt_tokens": 9,
        "completion_tokens": 64,
        "total_tokens": 73,
        "completion_tokens_details": {"reasoning_tokens": 64},
    }  # o-series: reasoning kept back
    base = scripted.add("hidden-reasoning", Script(parts=_answer_dropped_by_a_proxy(hidden)))
    assert open_client(base).stream("hi", model="o").wait().anomalies == []
    assert nito_nb.stream("hi", model="sim/echo").wait().anomalies == []


# -- 14. the magic's mistakes, each one line, up front ----------------------------------------------------


def test_magic_save_to_a_missing_folder_is_refused_before_sending(ip: Any, tmp_path: Any) -> None:
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="does not exist: make it first"):
        ip.run_cell_magic("nito", f"-m sim/echo --save {tmp_path}/missing/answer.jsonl", "hi")
    assert nito_nb.last() is None  # nothing was sent
    with pytest.raises(UsageError, match="is a folder"):
        ip.run_cell_magic("nito", f"-m sim/echo --save {tmp_path}", "hi")
    ip.run_cell_magic("nito", f"-m sim/echo --save {tmp_path}/answer.jsonl", "hi")
    assert nito_nb.load(tmp_path / "answer.jsonl").content == "hi"


def test_a_store_under_a_file_is_one_line(tmp_path: Any) -> None:
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(nito_nb.StoreError) as raised:
        nito_nb.run(
            ["x"], model="sim/echo", store=str(tmp_path / "notes.txt" / "sub"), progress=False
        )
    assert "a part of its path is a file" in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (
            "-m sim/echo --max_tokens 5",
            "unrecognized arguments: --max_tokens 5. Did you mean --max-tokens?",
        ),
        ("-m sim/echo --temprature=0.2", "Did you mean --temperature?"),
        (
            "-m sim/echo --model sim/chat",
            "argument -m/--model: given twice ('sim/echo', then 'sim/chat'): give it "
            "once (several models: -m a,b)",
        ),
        (
            "--system a --system b -m sim/echo",
            "argument --system: given twice ('a', then 'b'): give it once",
        ),
    ],
)
def test_magic_option_mistakes_are_one_line(ip: Any, line: str, said: str) -> None:
    from IPython.core.error import UsageError

    with pytest.raises(UsageError) as raised:
        ip.run_cell_magic("nito", line, "hi")
    assert said in str(raised.value) and "\n" not in str(raised.value)
    assert nito_nb.last() is None


def test_magic_config_of_no_setting_is_one_line_with_did_you_mean(ip: Any, capfd: Any) -> None:
    ip.run_line_magic("config", "Nito.tempreature = 0.2")
    # the unknown name is not warned about again
    ip.run_line_magic("config", "Nito.model = 'sim/echo'")
    err = capfd.readouterr().err
    assert (
        err
        == "nito: Nito has no setting 'tempreature'; it is ignored. Did you mean Nito.temperature?\n"
    )


@pytest.mark.spawns
def test_magic_config_of_no_setting_shows_no_file_path_in_a_kernel(tmp_path: Any) -> None:
    from conftest import execute_cells

    nb = execute_cells(["%load_ext nito_nb", "%config Nito.tempreature = 0.2"], tmp_path)
    shown = "".join(out.get("text", "") for out in nb.cells[1].outputs)
    assert (
        shown
        == "nito: Nito has no setting 'tempreature'; it is ignored. Did you mean Nito.temperature?\n"
    )


# -- 15. %nito models shows each description whole ----------------------------------------------------------


def test_magic_models_shows_every_description_whole_and_is_still_a_frame(ip: Any) -> None:
    import html

    from nito_nb.sim import SIM_MODELS

    models = ip.run_line_magic("nito", "models")
    assert "sim/chat" in set(models["id"]) and list(models.columns) == [
        "id",
        "source",
        "description",
    ]
    longest = max(SIM_MODELS.values(), key=len)
    assert len(longest) > 100  # pandas cut it at 50 characters
    assert html.escape(longest) in models._repr_html_()
    text = repr(models)
    assert " ".join(text.split()).count(" ".join(longest.split())) == 1  # wrapped, every word there
    assert max(len(line) for line in text.splitlines()) < 100


@pytest.mark.spawns
def test_magic_models_in_a_kernel_shows_descriptions_whole(tmp_path: Any) -> None:
    import html

    from conftest import execute_cells

    from nito_nb.sim import SIM_MODELS

    nb = execute_cells(["%load_ext nito_nb", "%nito models"], tmp_path)
    [out] = nb.cells[1].outputs
    shown = out["data"]["text/html"]
    assert all(html.escape(text, quote=False) in shown for text in SIM_MODELS.values())
