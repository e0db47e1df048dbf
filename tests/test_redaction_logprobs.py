"""The key in the tokens of ``logprobs`` (``choices[].logprobs.content`` and ``.refusal``: each
token, its ``bytes``, its ``top_logprobs``), over HTTP: the simulator's ``sim/echo`` repeats a
prompt holding the key, one token per chunk; a gateway of the test's own
(tests/scripted_server.py) sends the key whole in one token, split across the tokens of one chunk,
across chunks, in a refusal's tokens, and spelled with JSON escapes. No place a user looks holds
any piece of it: the Stream, ``s.logprobs``, ``s.choices``, the frame (its ``extras``) and
``tokens()``, the saved log and the Stream loaded from it, a run store. docs/SECURITY.md, "The
tokens of logprobs", says the rule; the every-split property is in test_redaction.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from scripted_server import Script, ScriptedServer

import nito_nb
from nito_nb.sim import SimServer

KEY = "sk-test-SECRET123"
MARK = "[redacted]"
MARKS = r"(?:\[redacted\])+"
#: Pieces of the key as the tokens carry them, and the escaped spelling; none may show anywhere.
FORBIDDEN = (KEY, "sk-test", "SECRET", "RET123", "-SEC", "\\u0053", "T123")


def spelled(value: Any) -> list[str]:
    """Every string of a JSON value, and what each list of byte values in it spells (a token's
    ``bytes``), and what the ``bytes`` of one list of tokens spell together."""
    out: list[str] = []

    def walk(item: Any) -> None:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            for k, v in item.items():
                walk(k)
                walk(v)
        elif isinstance(item, list):
            if item and all(isinstance(b, int) and 0 <= b < 256 for b in item):
                out.append(bytes(item).decode("utf-8", "replace"))
            joined = [
                b
                for entry in item
                if isinstance(entry, dict) and isinstance(entry.get("bytes"), list)
                for b in entry["bytes"]
            ]
            if joined:
                out.append(bytes(joined).decode("utf-8", "replace"))
            for v in item:
                walk(v)

    walk(value)
    return out


def places(s: nito_nb.Stream, tmp_path: Path) -> dict[str, str]:
    """Every place an ended Stream shows or keeps its tokens, as text."""
    s.save(tmp_path / "s.jsonl")
    loaded = nito_nb.load(tmp_path / "s.jsonl")
    chunks = [json.loads(e.data) for e in s.log if e.kind == "chunk"]
    frame = s.frame()
    return {
        "s.content": s.content,
        "s.refusal": s.refusal or "",
        "s.logprobs": "\n".join(spelled(s.logprobs)),
        "s.choices": "\n".join(spelled([c.logprobs for c in s.choices])),
        "log chunks": "\n".join(spelled(chunks)),
        "raw log": s.log.body.decode(),
        "frame": frame.to_csv(),
        "frame extras": "\n".join(spelled([json.loads(x) for x in frame["extras"].dropna()])),
        "tokens()": frame.nito.tokens().to_csv() + "".join(frame.nito.tokens()["token"]),
        # The saved events (its first line, the request, holds the prompt as the user wrote it).
        "saved log": "".join((tmp_path / "s.jsonl").read_text().splitlines(keepends=True)[1:]),
        "loaded": "\n".join(spelled(loaded.logprobs)) + loaded.content,
        "repr": repr(s),
    }


def leaks(where: dict[str, str]) -> list[tuple[str, str]]:
    return [(place, piece) for place, text in where.items() for piece in FORBIDDEN if piece in text]


def test_the_simulator_echoing_the_key_token_by_token_leaves_no_piece_of_it(tmp_path: Path) -> None:
    with SimServer(api_key=KEY) as base_url:
        s = nito_nb.stream(
            f"Repeat: {KEY} now",
            model="sim/echo",
            base_url=base_url,
            api_key=KEY,
            logprobs=True,
            top_logprobs=3,
        )
        s.wait()
    assert s.status == "done" and len(s.logprobs) > 3  # the key came over several chunks' tokens
    assert not leaks(places(s, tmp_path))
    tokens = [t["token"] for t in s.logprobs]
    assert (
        re.sub(MARKS, MARK, "".join(tokens)) == re.sub(MARKS, MARK, s.content) and MARK in s.content
    )
    # bytes follow their token; so does the top alternative that was the token
    for entry in s.logprobs:
        assert bytes(entry["bytes"]).decode() == entry["token"]
        assert all(bytes(a["bytes"]).decode() == a["token"] for a in entry["top_logprobs"])


def _entry(token: str, alternatives: list[str]) -> dict[str, Any]:
    return {
        "token": token,
        "logprob": -0.25,
        "bytes": list(token.encode()),
        "top_logprobs": [
            {"token": a, "logprob": -0.5, "bytes": list(a.encode())} for a in alternatives
        ],
    }


def _line(
    tokens: list[tuple[str, list[str]]], channel: str = "content", escape: bool = False
) -> bytes:
    """One chunk whose ``channel`` text is its tokens', with their logprobs (``escape``: the key's
    ``S`` written ``\\u0053`` in every string, which only decoding the JSON reads)."""
    text = "".join(token for token, _ in tokens)
    chunk = {
        "id": "g",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "delta": {channel: text},
                "logprobs": {channel: [_entry(t, a) for t, a in tokens]},
                "finish_reason": None,
            }
        ],
    }
    data = json.dumps(chunk)
    if escape:
        data = data.replace("SEC", "\\u0053EC")
    return b"data: " + data.encode() + b"\n\n"


_DONE = b"data: [DONE]\n\n"
ATTACKS: dict[str, list[bytes]] = {
    "whole in one token": [
        _line([("key ", ["key "]), (KEY, [KEY, "sk"]), (" ok", [" ok"])]),
        _DONE,
    ],
    "across the tokens of one chunk": [
        _line(
            [
                ("key", ["key"]),
                (" sk-test", [" sk-test", " sk"]),
                ("-SEC", ["-SEC", "-SECRET"]),
                ("RET123", ["RET123", "RET12"]),
                (" ok", [" ok"]),
            ]
        ),
        _DONE,
    ],
    "across chunks": [
        _line([("key", ["key"]), (" sk-test", [" sk-test", " the"])]),
        _line([("-SEC", ["-SEC", "-secret"])]),
        _line([("RET123", ["RET123", "RET"]), (" ok", [" ok"])]),
        _DONE,
    ],
    "escaped, across chunks": [
        _line([("key", ["key"]), (" sk-test-SEC", [" sk-test-SEC"])], escape=True),
        _line([("RET123 ok", ["RET123 ok"])]),
        _DONE,
    ],
    "escaped, whole": [
        _line([("key ", ["key "]), (KEY, [KEY])], escape=True),
        _line([(" ok", [" ok"])]),
        _DONE,
    ],
    "a refusal's tokens": [
        _line([("I can't share sk-test", ["I can't share sk-test"])], channel="refusal"),
        _line([("-SECRET123", ["-SECRET123", "-SECRET"])], channel="refusal"),
        _DONE,
    ],
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_gateway_echoing_the_key_in_logprobs_leaves_no_piece_of_it(
    scripted: ScriptedServer,
    tmp_path: Path,
    attack: str,
) -> None:
    parts = ATTACKS[attack]
    base = scripted.add(
        f"logprobs-{attack}", Script(parts=parts, delays=[0.0] + [0.2] * (len(parts) - 1))
    )
    s = nito_nb.stream(
        "hi", model="vendor/model", base_url=base, api_key=KEY, logprobs=True, top_logprobs=2
    )
    s.wait()
    shown = places(s, tmp_path)
    assert not leaks(shown)
    text = s.refusal if attack == "a refusal's tokens" else s.content
    assert text is not None and MARK in text
    rows = s.frame().nito.tokens()
    # The tokens still add up to their channel's text, with a marker per token that held a piece
    # of the key (each keeps its place: as many rows as tokens sent).
    assert re.sub(MARKS, MARK, "".join(rows["token"])) == re.sub(MARKS, MARK, text)
    tokens = s.logprobs if attack != "a refusal's tokens" else []
    assert all(bytes(t["bytes"]).decode() == t["token"] for t in tokens)


@pytest.mark.spawns
def test_a_run_store_holds_no_piece_of_a_key_in_logprobs(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    parts = ATTACKS["across chunks"]
    base = scripted.add(
        "logprobs-run", Script(parts=parts, delays=[0.0] + [0.2] * (len(parts) - 1))
    )
    store = tmp_path / "runs"
    r = nito_nb.run(
        ["one"],
        model="vendor/model",
        base_url=base,
        api_key=KEY,
        store=str(store),
        # The default run id is the time, "...T123456-..." from 12:30 to 12:39 UTC: a piece of
        # FORBIDDEN that is no piece of the key (the test failed every day in those ten minutes).
        run_id="logprobs-run",
        logprobs=True,
        top_logprobs=2,
        concurrency=1,
        max_retries=0,
        progress=False,
    )
    r.wait()
    shown = {"r.results()": r.results().to_csv(), "r.frame()": r.frame().to_csv()}
    with nito_nb.open_store(store) as opened:
        shown["stored events"] = opened.sql("select * from events").to_csv()
        for key in r.results()["key"]:
            stream = opened.streams(key)
            shown[f"stored stream {key}"] = (
                "\n".join(spelled(stream.logprobs)) + stream.log.body.decode()
            )
    for path in sorted(store.rglob("*")):
        if path.is_file():
            shown[f"{path.relative_to(store)} (bytes)"] = path.read_bytes().decode("latin-1")
    assert not leaks(shown)
    assert any(MARK in text for text in shown.values())
