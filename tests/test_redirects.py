"""A redirect from the gateway is an error that says where it pointed, and is never followed
(issue 28, item 7): followed, the request would carry the API key and the prompt to a host nobody
chose. It showed as an empty ``truncated`` stream with advice about proxies, or as "not an event
stream".

Real loopback servers: the gateway (tests/scripted_server.py) answers 3xx with a Location on a
second server, whose Script counts every request that reaches it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import HELLO, KEY
from scripted_server import Script, ScriptedServer

import nito_nb

REDIRECTS = (301, 302, 303, 307, 308)
#: What the message may never show of the Location: its path and its query (a credential).
SECRET_PATH = "/private-tenant-42/v1"
QUERY = "api-key=LOCATIONSECRET&sig=SIGNATURE99"


@pytest.fixture(scope="module")
def elsewhere() -> Iterator[ScriptedServer]:
    """The redirect's target: nothing may reach it from nito_nb's clients."""
    server = ScriptedServer().start()
    yield server
    server.stop()


@pytest.fixture
def target(elsewhere: ScriptedServer) -> Script:
    script = Script(parts=HELLO)
    elsewhere.add(SECRET_PATH, script)
    return script


def origin(server: ScriptedServer) -> str:
    return f"http://127.0.0.1:{server.port}"


def redirecting(
    scripted: ScriptedServer,
    elsewhere: ScriptedServer,
    name: str,
    status: int,
    content_type: str = "text/event-stream",
    location: str | None = None,
) -> tuple[str, Script]:
    """(base URL, Script) of a gateway answering ``status`` with a Location on ``elsewhere``."""
    if location is None:
        location = f"{origin(elsewhere)}{SECRET_PATH}/chat/completions?{QUERY}"
    script = Script(
        status=status,
        content_type=content_type,
        headers={"location": location},
        parts=[b"<html><body>Moved</body></html>"] if "html" in content_type else [],
    )
    return scripted.add(name, script), script


def check_said(error: BaseException, status: int, elsewhere: ScriptedServer) -> None:
    assert isinstance(error, nito_nb.RedirectError) and isinstance(error, nito_nb.APIError)
    assert error.status_code == status and error.location == origin(elsewhere)
    text = str(error)
    assert f"HTTP {status}" in text and f"redirect to {origin(elsewhere)}" in text
    assert "does not follow" in text and "API key" in text and "base URL" in text
    for secret in ("private-tenant", "LOCATIONSECRET", "SIGNATURE99", "api-key=", "?"):
        assert secret not in text, secret
    stream = error.stream
    assert stream is not None and stream.status == "failed" and stream.exception is error
    # The log keeps the Location as any URL is shown: its credential-like query values redacted.
    kept = stream.log.headers["location"]
    assert "LOCATIONSECRET" not in kept and "SIGNATURE99" not in kept and "[redacted]" in kept
    assert "proxy" not in text.lower() and "truncated" not in text.lower()


@pytest.mark.parametrize("content_type", ["text/event-stream", "text/html"])
@pytest.mark.parametrize("status", REDIRECTS)
def test_stream_says_where_a_redirect_pointed_and_does_not_follow_it(
    scripted: ScriptedServer,
    elsewhere: ScriptedServer,
    target: Script,
    status: int,
    content_type: str,
) -> None:
    base, gateway = redirecting(
        scripted, elsewhere, f"redirect-{status}-{content_type[5:9]}", status, content_type
    )
    with pytest.raises(nito_nb.RedirectError) as caught:
        nito_nb.stream("hi", model="vendor/model", base_url=base, api_key=KEY)
    check_said(caught.value, status, elsewhere)
    assert gateway.times == 1  # not retried (the client's default max_retries is 2)
    assert target.times == 0


@pytest.mark.parametrize("status", [307, 308])
def test_astream_says_where_a_redirect_pointed_and_does_not_follow_it(
    scripted: ScriptedServer, elsewhere: ScriptedServer, target: Script, status: int
) -> None:
    base, gateway = redirecting(scripted, elsewhere, f"aredirect-{status}", status)

    async def go() -> BaseException:
        s = nito_nb.astream("hi", model="vendor/model", base_url=base, api_key=KEY)
        with pytest.raises(nito_nb.RedirectError) as caught:
            await s
        return caught.value

    check_said(asyncio.run(go()), status, elsewhere)
    assert gateway.times == 1 and target.times == 0


def test_an_httpx_client_that_follows_redirects_is_not_followed_either(
    scripted: ScriptedServer, elsewhere: ScriptedServer, target: Script
) -> None:
    """httpx would drop the Authorization header on the way, but not a key in a header of the
    user's own (Azure's ``api-key``), and the prompt goes along with a 307 or 308."""
    base, _ = redirecting(scripted, elsewhere, "redirect-follow", 307)
    with httpx.Client(follow_redirects=True, headers={"api-key": KEY}) as http:
        with nito_nb.Client(api_key=KEY, base_url=base, http_client=http) as client:
            with pytest.raises(nito_nb.RedirectError) as caught:
                client.stream("hi", model="vendor/model")
            with pytest.raises(nito_nb.RedirectError):
                client.models()
    check_said(caught.value, 307, elsewhere)
    assert target.times == 0

    async def go() -> None:
        async with httpx.AsyncClient(follow_redirects=True, headers={"api-key": KEY}) as http:
            client = nito_nb.AsyncClient(api_key=KEY, base_url=base, http_client=http)
            with pytest.raises(nito_nb.RedirectError):
                await client.stream("hi", model="vendor/model")
            with pytest.raises(nito_nb.RedirectError):
                await client.models()

    asyncio.run(go())
    assert target.times == 0


@pytest.mark.parametrize("status", [301, 308])
def test_models_says_where_a_redirect_pointed(
    scripted: ScriptedServer, elsewhere: ScriptedServer, target: Script, status: int
) -> None:
    base, gateway = redirecting(
        scripted, elsewhere, f"models-redirect-{status}", status, "text/html"
    )
    with (
        nito_nb.Client(api_key=KEY, base_url=base) as client,
        pytest.raises(nito_nb.RedirectError) as caught,
    ):
        client.models()
    check_said(caught.value, status, elsewhere)

    async def go() -> BaseException:
        with pytest.raises(nito_nb.RedirectError) as caught:
            await nito_nb.AsyncClient(api_key=KEY, base_url=base).models()
        return caught.value

    check_said(asyncio.run(go()), status, elsewhere)
    assert gateway.times == 2 and target.times == 0


def test_a_run_stops_at_the_first_redirect_with_one_line(
    scripted: ScriptedServer,
    elsewhere: ScriptedServer,
    target: Script,
    capsys: pytest.CaptureFixture[str],
) -> None:
    base, gateway = redirecting(scripted, elsewhere, "run-redirect", 308)
    run = nito_nb.run(
        [f"q{i}" for i in range(50)],
        model="vendor/model",
        base_url=base,
        api_key=KEY,
        concurrency=2,
        progress=False,
    )
    run.wait()
    check_said(run.error, 308, elsewhere)
    results = run.results()
    assert set(results["status"]) <= {"failed", "stopped"} and "failed" in set(results["status"])
    assert (results.loc[results["status"] == "failed", "attempts"] == 1).all()  # never retried
    assert gateway.times <= 4 and target.times == 0  # those already on their way, not 50
    err = capsys.readouterr().err
    assert err.count("nito: the run stopped") == 1 and f"redirect to {origin(elsewhere)}" in err
    assert "private-tenant" not in err and "LOCATIONSECRET" not in err


def test_a_relative_location_and_a_missing_one(
    scripted: ScriptedServer, elsewhere: ScriptedServer
) -> None:
    base, _ = redirecting(
        scripted, elsewhere, "redirect-relative", 302, location=f"{SECRET_PATH}?{QUERY}"
    )
    with pytest.raises(nito_nb.RedirectError) as caught:
        nito_nb.stream("hi", model="vendor/model", base_url=base, api_key=KEY)
    assert caught.value.location == scripted.url  # the gateway's own host: only the path changed
    assert f"redirect to {scripted.url};" in str(caught.value) and "private-tenant" not in str(
        caught.value
    )

    bare = scripted.add("redirect-bare", Script(status=301, content_type="text/html"))
    with pytest.raises(nito_nb.RedirectError) as caught:
        nito_nb.stream("hi", model="vendor/model", base_url=bare, api_key=KEY)
    assert caught.value.location is None and "without a usable Location" in str(caught.value)


def test_a_saved_redirect_loads_as_the_same_error(
    scripted: ScriptedServer, elsewhere: ScriptedServer, tmp_path: Path
) -> None:
    """A saved log, and a Stream sent back by a run's worker process, rebuild it from the log."""
    base, _ = redirecting(scripted, elsewhere, "redirect-saved", 307)
    with pytest.raises(nito_nb.RedirectError) as caught:
        nito_nb.stream("hi", model="vendor/model", base_url=base, api_key=KEY)
    path = caught.value.stream.save(tmp_path / "redirect.jsonl")
    assert "LOCATIONSECRET" not in path.read_text()
    loaded = nito_nb.load(path)
    assert loaded.status == "failed" and isinstance(loaded.exception, nito_nb.RedirectError)
    assert str(loaded.exception) == str(caught.value) and loaded.error == caught.value.stream.error


def test_capture_says_a_redirect_was_one_and_changes_nothing_the_client_sees(
    scripted: ScriptedServer, elsewhere: ScriptedServer, target: Script
) -> None:
    """Capture records another library's requests: that client follows a redirect or not by its
    own settings. Each hop is a Stream; the redirect's says where it pointed."""
    base, _ = redirecting(scripted, elsewhere, "capture-redirect", 307)
    body = {
        "model": "vendor/model",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
    }

    def post(http: httpx.Client) -> tuple[int, bytes, list[int]]:
        with http.stream(
            "POST",
            f"{base}/chat/completions",
            json=body,
            headers={"authorization": f"Bearer {KEY}"},
        ) as response:
            return response.status_code, response.read(), [r.status_code for r in response.history]

    for follow in (False, True):
        with httpx.Client(follow_redirects=follow) as plain:
            seen_plain = post(plain)
        before = len(nito_nb.streams())
        with nito_nb.httpx_client(follow_redirects=follow) as captured:
            assert post(captured) == seen_plain  # what the client sees is not changed
        new = nito_nb.streams()[before:]
        assert len(new) == (2 if follow else 1)
        hop = new[0]
        assert hop.status == "failed" and isinstance(hop.exception, nito_nb.RedirectError)
        text = str(hop.exception)
        assert f"redirect to {origin(elsewhere)}" in text and "follow_redirects" in text
        assert "private-tenant" not in text and "LOCATIONSECRET" not in text
        assert "LOCATIONSECRET" not in json.dumps(hop.log.headers)
        if follow:
            assert new[1].status == "done" and new[1].content == "Hello wörld"
    assert target.times == 2  # the two followed requests: the client's choice, not nito_nb's
