"""The key goes only where the user sent it, never shows, and keyless servers need none.

Real loopback servers throughout: two scripted servers (tests/scripted_server.py) tell which one a
request reached and with which headers; the simulator runs as its own process for the keyless case.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import chunk_line
from IPython.core.error import UsageError
from scripted_server import Script, ScriptedServer

import nito_nb
from nito_nb._render import join_parts, render_parts

KEY = "sk-test-SECRET-0123456789abcdef"
ENV_KEY = "sk-env-OTHER-fedcba9876543210"

HELLO = [
    chunk_line({"role": "assistant", "content": "Hel"}),
    chunk_line({"content": "lo"}, finish="stop"),
    b"data: [DONE]\n\n",
]


@pytest.fixture(scope="module")
def other() -> Iterator[ScriptedServer]:
    """A second loopback server: what NITO_BASE_URL points to, where nothing may arrive."""
    server = ScriptedServer().start()
    yield server
    server.stop()


@pytest.fixture
def env_gateway(other: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> Script:
    """NITO_BASE_URL and NITO_API_KEY set to another server and key; the Script counts its hits."""
    script = Script(parts=HELLO)
    monkeypatch.setenv("NITO_BASE_URL", other.add("env-gateway", script))
    monkeypatch.setenv("NITO_API_KEY", ENV_KEY)
    return script


def sent(script: Script, i: int = -1) -> tuple[dict[str, Any], dict[str, str]]:
    """(JSON body, headers) of a request the script received."""
    request = script.requests[i]
    return json.loads(request["body"]), request["headers"]


def windows(secret: str, size: int = 6) -> list[str]:
    """Every piece of ``size`` characters of the key: not even part of it may show."""
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


# -- 1. reply() goes where the first turn went, with the same key ----------------------------------


def test_reply_goes_to_the_same_server_with_the_same_key(
    scripted: ScriptedServer, env_gateway: Script
) -> None:
    script = Script(parts=HELLO)
    base = scripted.add("reply-route", script)
    first = nito_nb.stream("first", model="vendor/model", base_url=base, api_key=KEY)
    assert first.content == "Hello"
    second = first.reply("second", temperature=0.5)
    assert second.content == "Hello" and second.request["base_url"] == base
    assert script.times == 2 and env_gateway.times == 0
    body, headers = sent(script)
    assert headers["authorization"] == f"Bearer {KEY}"
    assert body["messages"] == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "second"},
    ]
    assert body["temperature"] == 0.5
    third = second.reply("third").wait()  # and so on down the conversation
    assert third.status == "done" and script.times == 3 and env_gateway.times == 0
    assert len(sent(script)[0]["messages"]) == 5


def test_a_sim_model_sent_elsewhere_replies_there_not_to_the_embedded_simulator(
    scripted: ScriptedServer, env_gateway: Script
) -> None:
    script = Script(parts=HELLO)
    base = scripted.add("reply-sim", script)
    first = nito_nb.stream("first", model="sim/echo", base_url=base, api_key=KEY)
    second = first.reply("second")
    assert second.content == "Hello" and script.times == 2 and env_gateway.times == 0
    assert sent(script)[1]["authorization"] == f"Bearer {KEY}"


def test_reply_keeps_the_client_its_call_options_and_http_client(
    scripted: ScriptedServer, env_gateway: Script
) -> None:
    seen: list[str] = []
    http = httpx.Client(event_hooks={"request": [lambda request: seen.append(str(request.url))]})
    script = Script(parts=HELLO)
    base = scripted.add("reply-client", script)
    with (
        http,
        nito_nb.Client(
            base_url=f"{scripted.url}/not-this-one", http_client=http, max_retries=0
        ) as c,
    ):
        first = c.stream("first", model="m", base_url=base, api_key=KEY)
        first.reply("second").wait()
    assert seen == [f"{base}/chat/completions"] * 2
    assert script.times == 2 and env_gateway.times == 0
    assert [sent(script, i)[1]["authorization"] for i in (0, 1)] == [f"Bearer {KEY}"] * 2


def test_reply_keeps_the_call_timeout(scripted: ScriptedServer, env_gateway: Script) -> None:
    fast, slow = Script(parts=HELLO), Script(parts=HELLO, header_delay=5)
    base = scripted.add("reply-timeout", fast, slow)
    with nito_nb.Client(api_key=KEY, max_retries=0) as c:
        first = c.stream("first", model="m", base_url=base, timeout={"first_byte": 0.5})
        assert first.content == "Hello"
        start = time.perf_counter()
        with pytest.raises(nito_nb.FirstByteTimeout):
            first.reply("second")
    assert time.perf_counter() - start < 4  # the call's first_byte, not the default 300 s
    assert env_gateway.times == 0


def test_async_reply_goes_to_the_same_server(scripted: ScriptedServer, env_gateway: Script) -> None:
    script = Script(parts=HELLO)
    base = scripted.add("reply-async", script)

    async def main() -> nito_nb.AsyncStream:
        first = await nito_nb.astream("first", model="vendor/model", base_url=base, api_key=KEY)
        return await first.reply("second")

    second = asyncio.run(main())
    assert isinstance(second, nito_nb.AsyncStream) and second.content == "Hello"
    assert script.times == 2 and env_gateway.times == 0
    assert sent(script)[1]["authorization"] == f"Bearer {KEY}"
    assert [m["role"] for m in sent(script)[0]["messages"]] == ["user", "assistant", "user"]


def test_reply_sent_elsewhere_does_not_take_the_key_along(
    scripted: ScriptedServer, other: ScriptedServer, env_gateway: Script
) -> None:
    first_script, elsewhere = Script(parts=HELLO), Script(parts=HELLO)
    first = nito_nb.stream(
        "first", model="m", base_url=scripted.add("reply-here", first_script), api_key=KEY
    )
    first.reply("second", base_url=other.add("reply-elsewhere", elsewhere)).wait()
    assert elsewhere.times == 1 and sent(elsewhere)[1].get("authorization") != f"Bearer {KEY}"


# -- 2. a key that cannot go in a header is refused, and never shown ---------------------------------


@pytest.mark.parametrize(
    ("bad_key", "problem"),
    [
        (KEY + "\n", "newline"),
        (KEY + "\r\n", "newline"),
        (" " + KEY, "whitespace"),
        (KEY[:10] + " " + KEY[10:], "whitespace"),
        (KEY[:10] + "\u2013" + KEY[10:], "non-ASCII"),  # an en dash, copied from a web page
        (KEY[:10] + "\x7f" + KEY[10:], "control character"),
        (KEY[:10] + "\x00" + KEY[10:], "control character"),
    ],
)
def test_a_malformed_key_is_refused_without_showing_it(
    scripted: ScriptedServer, monkeypatch: pytest.MonkeyPatch, bad_key: str, problem: str
) -> None:
    script = Script(parts=HELLO)
    base = scripted.add("bad-key", script)
    monkeypatch.delenv("NITO_API_KEY", raising=False)
    errors = []
    with pytest.raises(nito_nb.ConfigurationError, match=problem) as info:
        nito_nb.stream("hi", model="m", base_url=base, api_key=bad_key, max_retries=0)
    errors.append(info.value)
    with nito_nb.Client(base_url=base, api_key=bad_key) as c:
        with pytest.raises(nito_nb.ConfigurationError, match=problem) as info:
            c.models()
    errors.append(info.value)
    if "\x00" not in bad_key:  # the environment cannot hold a NUL
        monkeypatch.setenv("NITO_API_KEY", bad_key)
        with pytest.raises(nito_nb.ConfigurationError, match="NITO_API_KEY") as info:
            nito_nb.stream("hi", model="m", base_url=base)
        errors.append(info.value)
    assert script.times == 0  # refused before anything was sent
    texts = [text for error in errors for text in (str(error), repr(error), error.message)]
    assert not [piece for piece in windows(KEY) for text in texts if piece in text]


def test_a_key_with_a_newline_in_the_magic_is_one_usage_line(
    ip: Any,
    scripted: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A refusal before sending is the magic's UsageError: IPython shows it as its one line.
    script = Script(parts=HELLO)
    monkeypatch.setenv("NITO_API_KEY", KEY + "\n")
    ip.run_line_magic("config", f"Nito.base_url = {scripted.add('magic-bad-key', script)!r}")
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic("nito", "-m vendor/model", "hi")
    line = str(info.value)
    assert "newline" in line and "\n" not in line
    captured = capsys.readouterr()
    assert not [piece for piece in windows(KEY) if piece in captured.out + captured.err + line]
    assert script.times == 0


# -- 3. whatever the gateway echoes of the key is redacted ------------------------------------------


def echoing_parts(key: str) -> list[bytes]:
    """A stream whose gateway echoes the key: in a comment and in its error chunk."""
    return [
        f": debug Authorization: Bearer {key}\n\n".encode(),
        chunk_line({"role": "assistant", "content": "partial "}),
        chunk_line(
            {"content": ""},
            finish="error",
            error={
                "code": 401,
                "message": f"Invalid key {key}",
                "metadata": {"header": f"Bearer {key}"},
            },
        ),
        b"data: [DONE]\n\n",
    ]


def everything_shown(
    s: nito_nb.Stream, error: BaseException | None, tmp_path: Path
) -> dict[str, str]:
    """Every place the text of a stream can reach: messages, reprs, files, frames, displays."""
    saved = s.save(tmp_path / "run.jsonl").read_text()
    return {
        "str(error)": str(error),
        "repr(error)": repr(error),
        "s.error": json.dumps(s.error),
        "repr(s)": repr(s),
        "exception": str(s.exception),
        "save()": saved,
        "load()": repr(nito_nb.load(tmp_path / "run.jsonl").error),
        "frame().to_csv()": s.frame().to_csv(),
        "live view": json.dumps(join_parts(render_parts(s, live=True))),
        "final view": json.dumps(s._repr_mimebundle_()),
        "headers": json.dumps(s.log.headers),
        "raw": b"".join(e.raw for e in s.log).decode(),
        "comments": json.dumps([e.comment for e in s.log if e.kind == "comment"]),
    }


def test_a_key_echoed_mid_stream_is_redacted_everywhere(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    script = Script(
        parts=echoing_parts(KEY),
        headers={"X-Debug-Auth": f"Bearer {KEY}", "X-Request-Id": "req-1"},
    )
    base = scripted.add("echo-midstream", script)
    s = nito_nb.stream("hi", model="m", base_url=base, api_key=KEY)
    with pytest.raises(nito_nb.MidStreamError) as info:
        s.wait()
    shown = everything_shown(s, info.value, tmp_path)
    leaks = [where for where, text in shown.items() if KEY in text]
    assert not leaks
    assert "Invalid key [redacted]" in str(info.value) and "Bearer [redacted]" in shown["comments"]
    assert s.content == "partial " and s.status == "error" and info.value.code == 401
    # A header whose value carries the key is not kept at all; the others are.
    assert "x-debug-auth" not in s.log.headers and s.log.headers["x-request-id"] == "req-1"


def test_a_key_split_across_two_reads_is_redacted(scripted: ScriptedServer, tmp_path: Path) -> None:
    body = b"".join(echoing_parts(KEY))
    cut = body.index(KEY.encode(), 60) + 12  # in the middle of the key of the error chunk
    base = scripted.add("echo-split", Script(parts=[body[:cut], body[cut:]], delays=[0, 0.3]))
    s = nito_nb.stream("hi", model="m", base_url=base, api_key=KEY, raise_errors=False).wait()
    shown = everything_shown(s, s.exception, tmp_path)
    assert not [where for where, text in shown.items() if KEY in text] and s.status == "error"


def test_escaped_and_encoded_forms_of_the_key_are_redacted(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    key = "Az/SECRET+base64=key0123456789"  # an Azure-style key, with / + =
    escaped = key.replace("/", "\\/")  # as a JSON encoder that escapes "/" writes it
    encoded = "Az%2FSECRET%2Bbase64%3Dkey0123456789"  # as in a URL
    note = f'data: {{"id":"gen-1","choices":[],"note":"seen {escaped} and {encoded}"}}\n\n'
    parts = echoing_parts(key)
    parts.insert(2, note.encode())
    base = scripted.add("echo-forms", Script(parts=parts))
    s = nito_nb.stream("hi", model="m", base_url=base, api_key=key, raise_errors=False).wait()
    shown = everything_shown(s, s.exception, tmp_path)
    assert s.status == "error"
    assert json.loads(s.log[2].data)["note"] == "seen [redacted] and [redacted]"
    for form in (key, escaped, encoded):
        assert not [where for where, text in shown.items() if form in text], form


def test_an_async_stream_redacts_too(scripted: ScriptedServer) -> None:
    base = scripted.add("echo-async", Script(parts=echoing_parts(KEY)))

    async def main() -> nito_nb.AsyncStream:
        return await nito_nb.astream(
            "hi", model="m", base_url=base, api_key=KEY, raise_errors=False
        )

    s = asyncio.run(main())
    assert s.status == "error" and KEY not in repr(s) and KEY not in str(s.exception)
    assert "[redacted]" in s.error["message"]


def test_an_http_error_header_echoing_the_key_is_dropped(scripted: ScriptedServer) -> None:
    script = Script(
        status=401,
        parts=[json.dumps({"error": {"message": f"bad key Bearer {KEY}"}}).encode()],
        content_type="application/json",
        headers={"WWW-Authenticate": f'Bearer realm="x", error="{KEY}"', "X-Request-Id": "req-2"},
    )
    base = scripted.add("echo-401", script)
    with pytest.raises(nito_nb.AuthenticationError) as info:
        nito_nb.stream("hi", model="m", base_url=base, api_key=KEY)
    stream = info.value.stream
    assert KEY not in str(info.value) and KEY not in info.value.body
    assert (
        "www-authenticate" not in stream.log.headers
        and stream.log.headers["x-request-id"] == "req-2"
    )
    with (
        nito_nb.Client(base_url=base, api_key=KEY) as c,
        pytest.raises(nito_nb.AuthenticationError) as info,
    ):
        c.models()
    assert KEY not in str(info.value) and "www-authenticate" not in info.value.stream.log.headers


def test_an_error_message_quoting_the_key_is_redacted(scripted: ScriptedServer) -> None:
    # httpx quotes a header it refuses in its error; here a header of the user's own httpx client.
    base = scripted.add("bad-header", Script(parts=HELLO))
    with httpx.Client(headers={"X-Also-Key": f"{KEY}\n"}) as http:
        with nito_nb.Client(api_key=KEY, base_url=base, http_client=http, max_retries=0) as c:
            with pytest.raises(nito_nb.ConnectionFailed) as info:
                c.stream("hi", model="m")
    error = info.value
    assert "[redacted]" in str(error)
    assert not [t for t in (str(error), repr(error), error.message, repr(error.stream)) if KEY in t]
    assert KEY not in json.dumps(error.stream.log.end)


def test_a_short_placeholder_key_is_not_redacted_from_answers(scripted: ScriptedServer) -> None:
    # vLLM and Ollama clients send a placeholder such as "EMPTY": it is no secret, and answers
    # that contain the word stay whole.
    base = scripted.add(
        "placeholder", Script(parts=[chunk_line({"content": "EMPTY set"}), b"data: [DONE]\n\n"])
    )
    s = nito_nb.stream("hi", model="m", base_url=base, api_key="EMPTY")
    assert s.content == "EMPTY set"


# -- 4. interpolation never puts the key in a prompt -----------------------------------------------


@pytest.mark.parametrize(
    "cell",
    [
        "Here is my environment: {os.environ}",
        "{os.environ!r}",
        '{os.environ["NITO_API_KEY"]}',
        '{os.environ["NITO_API_KEY"][::2]}',  # not even a part of it
        '{os.environ["NITO_API_KEY"]:.6}',
        "{os.environb}",
        '{settings["key"]}',
        "{settings}",
    ],
)
def test_the_magic_refuses_to_interpolate_the_key(
    ip: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], cell: str
) -> None:
    monkeypatch.setenv("NITO_API_KEY", KEY)
    ip.user_ns["os"] = os
    ip.user_ns["settings"] = {"key": KEY, "model": "sim/echo"}
    with pytest.raises(UsageError, match="API key") as info:
        ip.run_cell_magic("nito", "-m sim/echo", cell)
    captured = capsys.readouterr()
    assert not [
        piece for piece in windows(KEY) if piece in str(info.value) + captured.out + captured.err
    ]
    assert "_nito" not in ip.user_ns  # nothing was sent


def test_the_magic_still_interpolates_everything_else(
    ip: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NITO_API_KEY", KEY)
    monkeypatch.setenv("NITO_TOPIC", "streams")
    ip.user_ns["os"] = os
    ip.user_ns["settings"] = {"key": KEY, "model": "sim/echo"}
    ip.run_cell_magic("nito", "-m sim/echo", '{settings["model"]} on {os.environ["NITO_TOPIC"]}')
    assert ip.user_ns["_nito"].content == "sim/echo on streams"


# -- 13. the error names the base URL this call used ------------------------------------------------


def test_not_an_event_stream_names_the_url_of_the_call(scripted: ScriptedServer) -> None:
    base = scripted.add(
        "html-page", Script(parts=[b"<html>login</html>"], content_type="text/html")
    )
    with nito_nb.Client(api_key=KEY, base_url="https://gateway.example/v1") as c:
        with pytest.raises(nito_nb.NotEventStreamError) as info:
            c.stream("hi", model="m", base_url=base)
    assert f"Check the base URL ({base})" in str(info.value) and "gateway.example" not in str(
        info.value
    )


# -- 17. a server of one's own needs no key ---------------------------------------------------------


def test_an_explicit_base_url_needs_no_key_and_gets_no_header(
    scripted: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NITO_API_KEY", raising=False)
    script = Script(parts=HELLO)
    base = scripted.add("keyless", script)
    s = nito_nb.stream("hi", model="llama3", base_url=base)
    assert s.content == "Hello" and "authorization" not in sent(script)[1]
    s.reply("again").wait()
    assert script.times == 2 and "authorization" not in sent(script)[1]
    listing = Script(parts=[b'{"data": [{"id": "llama3"}]}'], content_type="application/json")
    with nito_nb.Client(base_url=scripted.add("keyless-models", listing)) as c:
        assert [m["id"] for m in c.models()] == ["llama3"]
    assert "authorization" not in listing.requests[-1]["headers"]

    async def main() -> str:
        return (await nito_nb.AsyncClient(base_url=base).stream("hi", model="llama3")).content

    assert asyncio.run(main()) == "Hello" and "authorization" not in sent(script)[1]


def test_nito_itself_still_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NITO_API_KEY", raising=False)
    monkeypatch.delenv("NITO_BASE_URL", raising=False)
    for base_url in (None, "https://api.trynito.ai/v1", "https://API.trynito.ai/v2/"):
        with pytest.raises(nito_nb.ConfigurationError, match="No API key"):
            nito_nb.stream("hi", model="vendor/model", base_url=base_url)
    monkeypatch.setenv("NITO_BASE_URL", "https://api.trynito.ai/v1")
    with pytest.raises(nito_nb.ConfigurationError, match="No API key"):
        nito_nb.stream("hi", model="vendor/model")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def sim_process() -> Iterator[str]:
    """``python -m nito_nb.sim`` as its own process, keyless, as a user would run it."""
    port = _free_port()
    env = {**os.environ, "NITO_SIM_TPS": "0", "NITO_SIM_TTFT_MS": "0"}
    env.pop("NITO_SIM_API_KEY", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "nito_nb.sim", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base}/models", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("python -m nito_nb.sim did not start") from None
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.spawns
def test_the_standalone_simulator_needs_no_key(
    sim_process: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NITO_API_KEY", raising=False)
    monkeypatch.delenv("NITO_BASE_URL", raising=False)
    first = nito_nb.stream("round trip", model="sim/echo", base_url=sim_process)
    assert first.content == "round trip" and first.status == "done"
    second = first.reply("and back")
    assert second.content == "and back" and second.request["base_url"] == sim_process
    with nito_nb.Client(base_url=sim_process) as c:
        assert "sim/echo" in [m["id"] for m in c.models()]


# -- a password in the base URL -------------------------------------------------------------------


def test_a_password_in_the_base_url_is_used_but_never_shown_or_saved(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    # https://user:pass@host is Basic auth (httpx sends it): a secret like the key. The request
    # kept on the Stream (saved files, stores, history) and every message and repr show the URL
    # with "[redacted]" in place of the credentials; the calls, reply() included, use it as given.
    password = "pw-Zq8XvN3kLm"
    script = Script(parts=HELLO)
    base = scripted.add("basic-auth", script)
    with_auth = base.replace("http://", f"http://alice:{password}@")
    first = nito_nb.stream("first", model="vendor/model", base_url=with_auth, api_key=KEY)
    second = first.reply("second")
    assert second.content == "Hello" and script.times == 2
    basic = "Basic " + base64.b64encode(f"alice:{password}".encode()).decode()
    assert [sent(script, i)[1]["authorization"] for i in range(2)] == [basic, basic]  # httpx's rule
    shown = everything_shown(first, None, tmp_path)
    shown["request"] = json.dumps(first.request)
    shown["reply's request"] = json.dumps(second.request)
    with nito_nb.Client(base_url=with_auth, api_key=KEY) as client:
        shown["repr(client)"] = repr(client)
    closed = f"http://alice:{password}@127.0.0.1:{_free_port()}/v1"
    with pytest.raises(nito_nb.NitoError) as info:
        nito_nb.stream("hi", model="vendor/model", base_url=closed, api_key=KEY)
    shown["connect error"] = str(info.value)
    for where, text in shown.items():
        assert password not in text and "alice" not in text, where
    assert first.request["base_url"] == base.replace("http://", "http://[redacted]@")
    assert "[redacted]@127.0.0.1" in shown["connect error"]


def test_a_key_written_into_the_prompt_is_sent_but_kept_nowhere(tmp_path: Path) -> None:
    # An f-string put the key into the prompt (interpolation refuses it; Python's own f-strings
    # cannot be refused): it went to the host chosen, as asked, but the saved log's request line,
    # the Stream's request and a run store's requests kept it as written.
    import nito_nb
    from nito_nb.sim import SimServer

    key = "sk-prompt-0123456789abcdef"
    with SimServer(api_key=key) as base_url:
        s = nito_nb.stream(f"Repeat: {key}", model="sim/echo", base_url=base_url, api_key=key)
        s.wait()
        assert s.status == "done" and "[redacted]" in s.content  # it was sent: the echo says so
        path = s.save(tmp_path / "answer.jsonl")
        assert key not in path.read_text(encoding="utf-8")
        assert key not in json.dumps(s.request) and "[redacted]" in json.dumps(s.request)
        assert key not in repr(s.messages)
        follow = s.reply("again")  # the history holds the marker, and the turn still goes through
        follow.wait()
        assert follow.status == "done" and key not in json.dumps(follow.request)
