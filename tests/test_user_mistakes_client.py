"""A user's mistakes with the client and the magic: each is one line that says what to do, never a
traceback from inside httpx, shlex or the replay's sleep, and never a secret of the URL.

Everything runs on the embedded simulator or against a closed port (nothing reaches the network).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from IPython.core.error import UsageError

import nito_nb
from nito_nb import _magic as _magic
from nito_nb.sim import ensure_server, token

SECRET = "s3cr3t-Q-0123456789abcdef"
#: Nothing listens on port 1: a connection there fails at once.
CLOSED = "http://127.0.0.1:1/v1"


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text, text
    return text


# -- 1. base_url of a wrong type -------------------------------------------------------------------


@pytest.mark.parametrize("bad", [8000, ["http://x/v1"], b"http://x/v1", 0, []], ids=repr)
def test_a_base_url_that_is_not_a_string_is_one_configuration_error(bad: Any) -> None:
    says = 'base_url must be a URL string like "https://host/v1"'
    # was AttributeError ('int' object has no attribute 'rstrip'), a bytes TypeError, or (a falsy
    # one) silently the embedded simulator
    with pytest.raises(nito_nb.ConfigurationError, match=says) as info:
        nito_nb.stream("hi", model="sim/chat", base_url=bad)
    one_line(info.value)
    for make in (nito_nb.Client, nito_nb.AsyncClient):
        with pytest.raises(nito_nb.ConfigurationError, match=says):
            make(base_url=bad)


# -- 2. a base_url that does not parse -----------------------------------------------------------


@pytest.mark.parametrize(
    "bad", ["http://localhost:abc/v1", "http://[::1/v1", "https://host:99999/v1"]
)
def test_a_base_url_that_does_not_parse_is_one_configuration_error(
    bad: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # was httpx.InvalidURL when the request was built, or ValueError (Invalid IPv6 URL)
    monkeypatch.delenv("NITO_BASE_URL", raising=False)
    says = f"base_url {bad!r} is not a valid URL"
    with pytest.raises(nito_nb.ConfigurationError, match=says.replace("[", r"\[")) as info:
        nito_nb.stream("hi", model="sim/chat", base_url=bad)
    assert one_line(info.value).endswith('give a URL like "https://host/v1".')
    for make in (nito_nb.Client, nito_nb.AsyncClient):
        with pytest.raises(nito_nb.ConfigurationError, match="is not a valid URL"):
            make(base_url=bad)
    with (
        nito_nb.Client() as c,
        pytest.raises(nito_nb.ConfigurationError, match="is not a valid URL"),
    ):
        c.models(base_url=bad)

    monkeypatch.setenv("NITO_BASE_URL", bad)  # read per call: refused per call, naming the variable
    with pytest.raises(
        nito_nb.ConfigurationError, match=f"NITO_BASE_URL {bad!r}".replace("[", r"\[")
    ):
        nito_nb.stream("hi", model="vendor/model", api_key="k")
    with nito_nb.Client() as c, pytest.raises(nito_nb.ConfigurationError, match="NITO_BASE_URL"):
        c.models()
    with pytest.raises(nito_nb.ConfigurationError, match="NITO_BASE_URL"):
        nito_nb.AsyncClient().stream("hi", model="vendor/model", api_key="k")
    assert "NITO_BASE_URL" in repr(nito_nb.Client())  # a repr never raises
    # sim/ models without a base URL in code still run on the embedded simulator
    assert nito_nb.stream("hi", model="sim/echo").content == "hi"


def test_a_bad_base_url_never_shows_its_password(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = f"http://user:{SECRET}@localhost:abc/v1?api-key={SECRET}"
    with pytest.raises(nito_nb.ConfigurationError) as info:
        nito_nb.stream("hi", model="sim/chat", base_url=bad)
    text = one_line(info.value)
    assert SECRET not in text and "[redacted]@localhost:abc" in text and "'abc'" in text
    monkeypatch.setenv("NITO_BASE_URL", bad)
    with pytest.raises(nito_nb.ConfigurationError) as info:
        nito_nb.stream("hi", model="vendor/model", api_key="k")
    assert SECRET not in str(info.value) and SECRET not in repr(nito_nb.Client())


# -- 4. a secret in the URL's query string -------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        f"key={SECRET}",
        f"api-version=2024-10-21&api-key={SECRET}",  # Azure OpenAI's style
        f"API_KEY={SECRET}",
        f"x-goog-api-key={SECRET}",
        f"access_token={SECRET}",
        f"sv=2022&sig={SECRET}",
        f"Signature={SECRET}",
        f"code={SECRET}",
        f"client_secret={SECRET}",
        f"password={SECRET}",
    ],
)
def test_credentials_in_the_query_never_show(query: str, caplog: pytest.LogCaptureFixture) -> None:
    url = f"{CLOSED}?{query}"
    with (
        caplog.at_level(logging.DEBUG),
        nito_nb.Client(max_retries=0) as c,
        pytest.raises(nito_nb.ConnectionFailed) as info,
    ):
        c.stream("hi", model="sim/chat", base_url=url)
    error = info.value
    shown = [
        str(error),
        repr(error),
        repr(error.stream),
        str(error.stream.request),
        repr(nito_nb.Client(base_url=url)),
        repr(error.stream._route),
        caplog.text,
    ]
    for text in shown:
        assert SECRET not in text
    assert "=[redacted]" in str(error)
    if "api-version" in query:  # what is not a credential stays readable
        assert "api-version=2024-10-21" in str(error)


def test_the_brief_s_example_never_shows_the_query_key(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG), pytest.raises(nito_nb.ConnectionFailed) as info:
        nito_nb.stream("hi", model="sim/chat", base_url=f"{CLOSED}?key={SECRET}")
    assert SECRET not in str(info.value) + repr(info.value) + caplog.text


def test_a_query_credential_is_neither_in_httpx_s_log_nor_a_saved_log(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    # A server that answers: httpx logs every request's URL at INFO, the query's key in it.
    base = ensure_server()
    url = f"{base}?api-key={SECRET}"
    # A handler on httpx's own logger, at DEBUG for the test: in the whole suite, other
    # libraries had set that logger's level, and the root's capture (caplog) saw nothing of it.
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("httpx")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG), nito_nb.Client(api_key=token(), max_retries=0) as c:
            stream = c.stream("hi", model="sim/chat", base_url=url).wait()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert stream.status == "done"  # the path goes before the query (api_url)
    text = "\n".join(record.getMessage() for record in records) + caplog.text
    # LiteLLM, once imported by another test, puts a filter of its own first ("?REDACTED"): what
    # counts is that the secret is in no record; our filter is checked by itself just below.
    assert "HTTP Request" in text and SECRET not in text and SECRET not in repr(stream)
    from nito_nb._client.clients import _ShownURLs

    sent = f"{base}/chat/completions?api-key={SECRET}"
    record = logging.LogRecord(
        "httpx", logging.INFO, __file__, 1, "HTTP Request: %s %s", ("POST", httpx.URL(sent)), None
    )
    assert _ShownURLs().filter(record)
    assert record.getMessage() == f"HTTP Request: POST {base}/chat/completions?api-key=[redacted]"
    stream.save(tmp_path / "log.jsonl")
    assert SECRET not in (tmp_path / "log.jsonl").read_text()


def test_a_base_urls_query_stays_after_the_path_of_every_call() -> None:
    # Azure OpenAI takes ?api-version= on every call: the path went inside the query.
    from nito_nb._client.endpoint import api_url

    assert api_url("https://h/v1", "/models") == "https://h/v1/models"
    assert api_url(
        "https://h/openai/deployments/d?api-version=2024-06-01", "/chat/completions"
    ) == ("https://h/openai/deployments/d/chat/completions?api-version=2024-06-01")
    assert api_url("https://h/v1/?a=1&b=2", "/models") == "https://h/v1/models?a=1&b=2"
    base = ensure_server() + "?api-version=2024-06-01"
    with nito_nb.Client(api_key=token()) as c:
        assert c.stream("hi", model="sim/echo", base_url=base).wait().content == "hi"
        assert any(m["id"] == "sim/chat" for m in c.models(base_url=base))

    async def both() -> Any:
        client = nito_nb.AsyncClient(api_key=token())
        return await client.models(base_url=base)

    assert any(m["id"] == "sim/chat" for m in asyncio.run(both()))


def test_shown_url_leaves_plain_urls_alone() -> None:
    from nito_nb._client import shown_url

    for url in (
        "https://api.trynito.ai/v1",
        "http://[::1]:8000/v1?api-version=1&model=a#x",
        "http://[::1/v1",
        "localhost:8000",
        "",
        "http://h/v1?monkey",
        "http://h/v1?a=1&b",
    ):
        assert shown_url(url) == url
    assert (
        shown_url("http://u:p@h/v1?token=t&x=1#access_token=y")
        == "http://[redacted]@h/v1?token=[redacted]&x=1#access_token=[redacted]"
    )
    assert shown_url("http://h/v1?my%5Fkey=abc") == "http://h/v1?my%5Fkey=[redacted]"


# -- 8. the wrong http_client, a closed client -----------------------------------------------------


def test_the_wrong_http_client_is_one_configuration_error() -> None:
    # were AttributeError ('str' has no build_request; 'coroutine' has no status_code) at the first
    # request, and httpcore's TypeError about a trace callback
    with pytest.raises(
        nito_nb.ConfigurationError, match=r"nito_nb.Client takes an httpx.Client"
    ) as info:
        nito_nb.Client(http_client="x")  # type: ignore[arg-type]
    one_line(info.value)
    other = httpx.AsyncClient()
    with pytest.raises(
        nito_nb.ConfigurationError,
        match=r"nito_nb.Client takes an httpx.Client, not an httpx.AsyncClient",
    ):
        nito_nb.Client(http_client=other)  # type: ignore[arg-type]
    with (
        httpx.Client() as sync,
        pytest.raises(
            nito_nb.ConfigurationError,
            match=r"nito_nb.AsyncClient takes an httpx.AsyncClient, not an httpx.Client",
        ),
    ):
        nito_nb.AsyncClient(http_client=sync)  # type: ignore[arg-type]
    asyncio.run(other.aclose())


def test_a_closed_client_says_so() -> None:
    c = nito_nb.Client()
    c.close()
    says = r"This nito_nb.Client is closed .*make a new one"
    with pytest.raises(nito_nb.ConfigurationError, match=says) as info:  # was httpx's RuntimeError
        c.stream("hi", model="sim/chat")
    one_line(info.value)
    with pytest.raises(nito_nb.ConfigurationError, match=says):
        c.models(base_url=CLOSED)
    http = httpx.Client()
    mine = nito_nb.Client(http_client=http)
    http.close()
    with pytest.raises(
        nito_nb.ConfigurationError, match=r"The httpx.Client given as http_client is closed"
    ):
        mine.stream("hi", model="sim/chat")

    async def closed_async() -> None:
        http = httpx.AsyncClient()
        await http.aclose()
        client = nito_nb.AsyncClient(http_client=http)
        with pytest.raises(
            nito_nb.ConfigurationError,
            match=r"The httpx.AsyncClient given as http_client is closed",
        ):
            await client.stream("hi", model="sim/chat").wait()
        with pytest.raises(
            nito_nb.ConfigurationError,
            match=r"The httpx.AsyncClient given as http_client is closed",
        ):
            await client.models(base_url=CLOSED)

    asyncio.run(closed_async())


# -- the magic: 3. Nito.base_url, 5. an unclosed quote, 6. --speed -----------------------------------


def _settings(ip: Any) -> Any:
    return next(c for c in ip.configurables if isinstance(c, _magic.Nito))


@pytest.mark.parametrize(
    "bad", ["http://localhost:abc/v1", "http://[::1/v1", f"http://u:{SECRET}@h:abc/v1"]
)
def test_magic_config_refuses_a_base_url_that_does_not_parse(
    ip: Any, caplog: pytest.LogCaptureFixture, bad: str
) -> None:
    # was accepted (the port), or logged the parser's error and changed the setting anyway
    with caplog.at_level("ERROR"):
        ip.run_line_magic("config", f"Nito.base_url = {bad!r}")
    assert _settings(ip).base_url is None
    [record] = caplog.records
    message = record.getMessage()
    assert (
        message.startswith("Nito.base_url")
        and "is not a valid URL" in message
        and "unchanged" in message
    )
    assert "\n" not in message and SECRET not in message


def test_magic_never_shows_a_credential_of_its_base_url(
    ip: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ip.run_line_magic("config", f"Nito.base_url = '{CLOSED}?api-key={SECRET}'")
    ip.run_line_magic("nito", "config")
    ip.run_cell_magic("nito", "-m sim/chat", "hi")  # a ConnectionFailed line
    out = capsys.readouterr()
    assert "api-key=[redacted]" in out.out and "ConnectionFailed" in out.err
    assert SECRET not in out.out + out.err
    ip.run_line_magic("config", "Nito.base_url = None")
    monkeypatch.setenv("NITO_BASE_URL", "http://localhost:abc/v1")
    with pytest.raises(
        UsageError, match="NITO_BASE_URL 'http://localhost:abc/v1' is not a valid URL"
    ):
        ip.run_cell_magic("nito", "-m vendor/model", "hi")


@pytest.mark.parametrize(
    "line", ['--system "Be brief', "--system 'Be brief", '-m sim/chat --param sim=\'{"tps": 5}']
)
def test_magic_an_unclosed_quote_is_one_usage_error(ip: Any, line: str) -> None:
    # was shlex's ValueError traceback
    with pytest.raises(UsageError, match="is not closed") as info:
        ip.run_cell_magic("nito", line, "hi")
    assert "\n" not in str(info.value)
    with pytest.raises(UsageError, match="is not closed"):
        ip.run_line_magic("nito", '--replay "x.jsonl')


@pytest.fixture
def saved_log(ip: Any, tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    ip.run_cell_magic("nito", f"-m sim/echo --save {path}", "one two three")
    return path


@pytest.mark.parametrize("speed", ["-1", "nan", "inf", "-inf"])
def test_magic_replay_refuses_a_speed_that_is_not_a_positive_number(
    ip: Any, saved_log: Path, speed: str
) -> None:
    kept = ip.user_ns["_nito"]
    # was accepted silently (as if --speed 0)
    with pytest.raises(
        UsageError, match=f"--speed is a factor, a finite number > 0 .*not {speed}"
    ) as info:
        ip.run_line_magic("nito", f"--replay {saved_log} --speed={speed}")  # = for -inf (argparse)
    assert "\n" not in str(info.value)
    assert ip.user_ns["_nito"] is kept  # refused before anything was shown or kept


@pytest.mark.parametrize("speed", ["1e-300", "1e-9"])
def test_magic_replay_refuses_a_speed_that_would_take_over_a_day(
    ip: Any, saved_log: Path, speed: str
) -> None:
    # 1e-300 was an OverflowError from time.sleep; 1e-9 waited for months
    with pytest.raises(UsageError, match=r"would take .* \(over a day") as info:
        ip.run_line_magic("nito", f"--replay {saved_log} --speed {speed}")
    assert "\n" not in str(info.value)
    ip.run_line_magic("nito", f"--replay {saved_log} --speed 0")  # 0: at once, as the help says
    assert ip.user_ns["_nito"].content == "one two three"


def test_a_bad_nito_sim_variable_says_which_variable_to_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NITO_SIM_TPS", "fast")
    with pytest.raises(nito_nb.BadRequestError) as info:
        nito_nb.stream("hi", model="sim/chat").wait()
    # was "...is not a number >= 0 The gateway rejected..." (no word on what to do)
    message = str(info.value)
    assert (
        "environment variable NITO_SIM_TPS='fast' is not a number >= 0: set it to one, or unset it"
        in message
    )
    assert "\n" not in message and ". The gateway rejected" in message
    monkeypatch.delenv("NITO_SIM_TPS")
    with pytest.raises(nito_nb.BadRequestError, match=r"sim\.tps must be a number, got 'x'\. "):
        nito_nb.stream("hi", model="sim/chat", sim={"tps": "x"}).wait()


# -- 9. a password with a "/" (or "?", "#") as it is, not percent-encoded ----------------------------

#: The two halves of a password around its "/": neither may show anywhere.
BEFORE, AFTER = "pa55-Kx", "Q-0123456789abcdef"


@pytest.mark.parametrize(
    "bad",
    [
        f"https://user:{BEFORE}/{AFTER}@host.example/v1",
        f"http://u:{BEFORE}/{AFTER}@127.0.0.1:9/v1",
        f"https://user:{BEFORE}?{AFTER}@host.example/v1",
        f"https://user:{BEFORE}#{AFTER}@host.example/v1",
        f"http://localhost:1/{AFTER}@host.example/v1?api-key={SECRET}",  # "1/...": was sent to localhost:1
    ],
)
def test_a_password_with_a_slash_is_one_line_that_shows_no_part_of_it(
    bad: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    recwarn: pytest.WarningsRecorder,
) -> None:
    # Both parsers end the host at the "/": the user name was read as the host and the password's
    # start as its port, quoted in the error ("...integer value as 'pa55-Kx'") with the rest shown
    # as the path; when the start was a number, the request went to a host named like the user.
    monkeypatch.delenv("NITO_BASE_URL", raising=False)
    texts = []
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(nito_nb.ConfigurationError) as info:
            nito_nb.stream("hi", model="sim/chat", base_url=bad)
        first = one_line(info.value)
        for make in (nito_nb.Client, nito_nb.AsyncClient):
            with pytest.raises(nito_nb.ConfigurationError) as info:
                make(base_url=bad)
            texts.append(one_line(info.value))
        with nito_nb.Client() as c, pytest.raises(nito_nb.ConfigurationError) as info:
            c.models(base_url=bad)
        texts.append(one_line(info.value))
        # read per call: refused per call, naming the variable
        monkeypatch.setenv("NITO_BASE_URL", bad)
        with pytest.raises(nito_nb.ConfigurationError) as info:
            nito_nb.stream("hi", model="vendor/model", api_key="k")
        from_env = one_line(info.value)
        texts.append(repr(nito_nb.Client()))
    texts += [first, from_env, caplog.text, *(str(warning.message) for warning in recwarn)]
    for text in texts:
        assert BEFORE not in text and AFTER not in text and SECRET not in text, text
    scheme, _, rest = bad.partition("//")
    shown = f"{scheme}//[redacted]@{rest.partition('@')[2]}".replace(SECRET, "[redacted]")
    assert first.startswith(f'base_url {shown!r} has a "/", "?" or "#" in its password')
    assert '"/" as %2F' in first and first.endswith(
        '(no password: write the "@" after the port as %40).'
    )
    assert from_env.startswith(f"NITO_BASE_URL {shown!r} has a")


@pytest.mark.parametrize(
    "bad", [f"user:{BEFORE}@host.example/v1", f"user:{BEFORE}/{AFTER}@host.example/v1"]
)
def test_a_base_url_without_a_scheme_shows_no_part_of_its_password(bad: str) -> None:
    # "user:" was read as a scheme, the rest shown
    with pytest.raises(nito_nb.ConfigurationError) as info:
        nito_nb.Client(base_url=bad)
    message = one_line(info.value)
    assert BEFORE not in message and AFTER not in message
    assert message.startswith(
        "base_url '[redacted]@host.example/v1' must start with http:// or https://"
    )


def test_a_percent_encoded_password_is_taken_and_not_shown() -> None:
    url = f"https://user:{BEFORE}%2F{AFTER}@host.example/v1"  # what the message says to do
    client = nito_nb.Client(base_url=url)
    assert client.base_url == url
    assert repr(client) == "<Client base_url='https://[redacted]@host.example/v1' api_key=unset>"


def test_magic_config_refuses_a_password_with_a_slash(
    ip: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("ERROR"):
        ip.run_line_magic(
            "config", f"Nito.base_url = 'https://user:{BEFORE}/{AFTER}@host.example/v1'"
        )
    assert _settings(ip).base_url is None
    [record] = caplog.records
    message = record.getMessage()
    assert message.startswith("Nito.base_url 'https://[redacted]@host.example/v1' has a")
    assert "%2F" in message and message.endswith("The setting is unchanged.")
    assert "\n" not in message and BEFORE not in message and AFTER not in message


@pytest.mark.parametrize(
    "bad", ["http://localhost:abc/v1", f"https://user:{BEFORE}/{AFTER}@host.example/v1"]
)
def test_magic_config_says_a_bad_nito_base_url_is_not_usable(
    ip: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    # was shown as the effective base URL as if it were fine (and with the password's halves)
    from nito_nb._client import checked_base_url

    with pytest.raises(nito_nb.ConfigurationError) as info:
        checked_base_url(bad, "NITO_BASE_URL")
    monkeypatch.setenv("NITO_BASE_URL", bad)
    ip.run_line_magic("nito", "config")  # says so, does not raise
    out = capsys.readouterr().out
    [line] = [line for line in out.splitlines() if "effective base URL" in line]
    assert (
        line
        == f"  effective base URL: not usable, so only sim/... models run (on the embedded simulator): {info.value}"
    )
    assert BEFORE not in out and AFTER not in out
    ip.run_cell_magic("nito", "-m sim/echo", "hi")  # as the line says
    assert ip.user_ns["_nito"].content == "hi"
