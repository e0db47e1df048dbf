"""The simulator locked down (issue 28, item 1), probed as another process would: no key, a foreign
Host (a DNS-rebinding page), a text/plain body (a cross-site form), and sim/replay of a file outside
the replay directories (an absolute path, ``..``, a symlink out, and whether the answer tells if a
path exists). Against the three simulators: the in-process one (``ensure_server``), a Run's
process (``ensure_process``) and ``python -m nito_nb.sim`` started as a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import nito_nb
from nito_nb import sim
from nito_nb._client import Simulator
from nito_nb._runs.plan import Request
from nito_nb._runs.processes import ProcessEngine
from nito_nb.sim import SimServer, _access, _files
from nito_nb.sim import _process as _apart

pytestmark = pytest.mark.skipif(
    os.name != "posix", reason="symlinks, /proc and the simulator process need POSIX"
)

REAL = Path(__file__).parent / "data" / "real"
RECORDING = REAL / "openai-content-1.sse"
#: What the files outside hold: no answer of the simulator may carry it.
MARKER = "the-owner-s-private-notes-7f3a"
CLI_KEY = "sk-sim-cli-key-0123456789abcdef"


@dataclass(frozen=True)
class Layout:
    inside: Path  # the replay directory
    outside: Path  # a folder beside it, holding what another user must not read


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    root = tmp_path_factory.mktemp("lockdown")
    inside, outside = root / "inside", root / "outside"
    inside.mkdir()
    outside.mkdir()
    (inside / "ok.sse").write_bytes(RECORDING.read_bytes())
    (inside / "sub").mkdir()
    (inside / "sub" / "linked.sse").symlink_to(inside / "ok.sse")  # a link that stays inside
    # A saved log of the owner's (0600, as the issue's), and a text file a link points to.
    owner = nito_nb.read_sse(
        f'data: {{"choices":[{{"index":0,"delta":{{"content":"{MARKER}"}}}}]}}\n\ndata: [DONE]\n\n'
    )
    owner.save(outside / "secret.jsonl")
    (outside / "secret.jsonl").chmod(0o600)
    (outside / "secret.sse").write_text(f"data: {MARKER}\n\n")
    (outside / "notes.txt").write_text(f"{MARKER}\n")
    (outside / "folder.sse").mkdir()
    (inside / "steal.sse").symlink_to(outside / "notes.txt")
    (inside / "steal-log.jsonl").symlink_to(outside / "secret.jsonl")
    (inside / "dangling.sse").symlink_to(outside / "nothing.sse")
    return Layout(inside, outside)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def cli(
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    key: str | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``python -m nito_nb.sim`` as a user starts it: (its base URL, its process) once it serves."""
    port = _free_port()
    environment = {
        k: v for k, v in os.environ.items() if k not in ("NITO_SIM_API_KEY", "NITO_SIM_REPLAY_DIRS")
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "nito_nb.sim", "--port", str(port), *args],
        env={**environment, **(env or {})},
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}/v1"
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base}/models", headers=headers, timeout=1)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    assert process.stderr is not None
                    raise RuntimeError(
                        f"python -m nito_nb.sim did not start: {process.stderr.read()[-2000:]!r}"
                    ) from None
                time.sleep(0.1)
        yield base, process
    finally:
        process.terminate()
        process.wait(10)
        if process.stderr is not None:
            process.stderr.close()


@dataclass(frozen=True)
class Target:
    name: str
    base_url: str
    key: str
    where: str  # what the 401 says about where the key is

    @property
    def port(self) -> int:
        return httpx.URL(self.base_url).port or 80

    def headers(self, **more: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}", **more} if self.key else more


@pytest.fixture(scope="module")
def replay_env(layout: Layout) -> Iterator[None]:
    """The replay directory of the simulators nito_nb starts: ``inside`` only."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NITO_SIM_REPLAY_DIRS", str(layout.inside))
        yield


@pytest.fixture(scope="module")
def cli_target(layout: Layout) -> Iterator[Target]:
    # The key and the replay directory from the environment: neither on the command line.
    with cli(
        [],
        env={"NITO_SIM_API_KEY": CLI_KEY, "NITO_SIM_REPLAY_DIRS": str(layout.inside)},
        key=CLI_KEY,
    ) as (base, _):
        yield Target("python -m nito_nb.sim", base, CLI_KEY, "NITO_SIM_API_KEY")


@pytest.fixture(
    params=[
        "in-process",
        "a Run's process",
        pytest.param("python -m nito_nb.sim", marks=pytest.mark.spawns),
    ]
)
def target(request: pytest.FixtureRequest, replay_env: None) -> Target:
    if request.param == "in-process":
        return Target(request.param, sim.ensure_server(), sim.token(), "nito_nb.sim.token()")
    if request.param == "a Run's process":
        return Target(request.param, _apart.ensure_process(), sim.token(), "nito_nb.sim.token()")
    return request.getfixturevalue("cli_target")


BODY = {"model": "sim/echo", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def replay(target: Target, path: str | Path, **headers: str) -> httpx.Response:
    body = {**BODY, "model": "sim/replay", "sim": {"replay": str(path), "speed": 0}}
    return httpx.post(
        f"{target.base_url}/chat/completions",
        json=body,
        headers=target.headers(**headers),
        timeout=30,
    )


def error_of(response: httpx.Response) -> str:
    error = response.json()["error"]
    assert error["code"] == response.status_code and "\n" not in error["message"]
    return str(error["message"])


# -- the key ---------------------------------------------------------------------------------------


PROBE = """
import json, sys, urllib.error, urllib.request
base = sys.argv[1]
out = []
for method, path, body in [("GET", "/models", None), ("GET", "/models/sim/chat", None),
                           ("POST", "/chat/completions", json.dumps(json.loads(sys.argv[2])).encode())]:
    request = urllib.request.Request(base + path, data=body, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            out.append([response.status, response.read().decode()])
    except urllib.error.HTTPError as error:
        out.append([error.code, error.read().decode()])
print(json.dumps(out))
"""


@pytest.mark.spawns
def test_another_process_without_the_key_gets_a_401_that_says_where_the_key_is(
    target: Target,
) -> None:
    # Another local user's process: the standard library, no nito_nb, no key.
    out = subprocess.run(
        [sys.executable, "-c", PROBE, target.base_url, json.dumps(BODY)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    for status, body in json.loads(out.stdout):
        assert status == 401, (target.name, status, body)
        message = json.loads(body)["error"]["message"]
        assert message.startswith("Missing Authorization header") and target.where in message
        assert target.key not in body
    wrong = httpx.get(
        f"{target.base_url}/models", headers={"Authorization": "Bearer sk-a-guess-0000000000"}
    )
    assert wrong.status_code == 401 and error_of(wrong).startswith("Invalid API key")
    assert target.key not in wrong.text
    assert httpx.get(f"{target.base_url}/models", headers=target.headers()).status_code == 200


def test_nito_nb_sends_the_token_itself_and_it_is_the_only_way_in(replay_env: None) -> None:
    s = nito_nb.stream("hi", model="sim/echo", sim={"tps": 0})
    assert s.wait().content == "hi"
    run = nito_nb.run(["a", "b"], model="sim/echo", progress=False, sim={"tps": 0}).wait(timeout=60)
    assert run.error is None and run.results()["content"].tolist() == ["a", "b"]
    # The openai SDK, given the token as its key (what the 401 says to do).
    import openai

    with openai.OpenAI(base_url=sim.ensure_server(), api_key=sim.token(), max_retries=0) as client:
        assert client.models.retrieve("sim/echo").id == "sim/echo"
    with openai.OpenAI(base_url=sim.ensure_server(), api_key="unused", max_retries=0) as client:
        with pytest.raises(openai.AuthenticationError, match=r"nito_nb\.sim\.token\(\)"):
            client.models.retrieve("sim/echo")


# -- the Host --------------------------------------------------------------------------------------


#: Names a DNS-rebinding page may point at 127.0.0.1 (with or without the port).
FOREIGN_HOSTS = [
    "attacker.example",
    "attacker.example:{port}",
    "127.0.0.1.attacker.example",
    "localhost.attacker.example:{port}",
    "LOCALHOST.evil",
]


def test_a_foreign_host_is_refused_even_with_the_key(target: Target) -> None:
    # What a DNS-rebinding page sends: its own name, pointed at 127.0.0.1, and a text/plain body.
    for host in (h.format(port=target.port) for h in FOREIGN_HOSTS):
        for response in [
            httpx.get(f"{target.base_url}/models", headers=target.headers(Host=host)),
            httpx.post(
                f"{target.base_url}/chat/completions",
                content=json.dumps(BODY),
                headers=target.headers(Host=host, **{"Content-Type": "text/plain"}),
            ),
            httpx.post(
                f"{target.base_url}/chat/completions", json=BODY, headers=target.headers(Host=host)
            ),
        ]:
            assert response.status_code == 403, (target.name, host, response.text)
            assert "DNS rebinding" in error_of(response) and "127.0.0.1" in error_of(response)
    # Loopback names and addresses are answered, whatever the port says.
    for host in [
        f"127.0.0.1:{target.port}",
        f"localhost:{target.port}",
        "localhost",
        "127.0.0.2",
        "[::1]:80",
    ]:
        response = httpx.get(f"{target.base_url}/models", headers=target.headers(Host=host))
        assert response.status_code == 200, (target.name, host, response.text)


# -- the body's type -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        None,
    ],
)
def test_a_body_that_is_not_json_is_refused(target: Target, content_type: str | None) -> None:
    # What a cross-site page can POST without a preflight: the JSON itself, under another type.
    headers = (
        target.headers()
        if content_type is None
        else target.headers(**{"Content-Type": content_type})
    )
    response = httpx.post(
        f"{target.base_url}/chat/completions", content=json.dumps(BODY).encode(), headers=headers
    )
    assert response.status_code == 415, (target.name, content_type, response.text)
    assert "Content-Type: application/json" in error_of(response)
    ok = httpx.post(
        f"{target.base_url}/chat/completions",
        content=json.dumps(BODY).encode(),
        headers=target.headers(**{"Content-Type": "application/json; charset=utf-8"}),
    )
    assert ok.status_code == 200 and b"[DONE]" in ok.content


# -- sim/replay ------------------------------------------------------------------------------------


def test_replay_of_a_path_outside_is_refused(target: Target, layout: Layout) -> None:
    for path in [
        layout.outside / "secret.jsonl",
        layout.outside / "secret.sse",
        f"{layout.inside}/../outside/secret.sse",
        f"{layout.inside}/sub/../../outside/secret.jsonl",
    ]:
        response = replay(target, path)
        assert response.status_code == 403, (target.name, path, response.text)
        assert MARKER not in response.text and "replay directories" in error_of(response)


def test_a_symlink_inside_that_points_outside_is_refused(target: Target, layout: Layout) -> None:
    for name in ["steal.sse", "steal-log.jsonl"]:
        response = replay(target, layout.inside / name)
        assert response.status_code == 403, (target.name, name, response.text)
        assert MARKER not in response.text
    # What is inside plays, also through a link that stays inside.
    for path in [layout.inside / "ok.sse", layout.inside / "sub" / "linked.sse"]:
        response = replay(target, path)
        assert response.status_code == 200 and response.content == RECORDING.read_bytes(), (
            target.name
        )


def test_the_answer_does_not_tell_whether_a_path_outside_exists(
    target: Target, layout: Layout
) -> None:
    answers = set()
    for path in [
        layout.outside / "secret.sse",
        layout.outside / "nothing.sse",
        layout.outside / "folder.sse",
        Path("/nonexistent-root-dir/x.sse"),
        layout.inside / "dangling.sse",
    ]:
        response = replay(target, path)
        answers.add((response.status_code, error_of(response).replace(repr(str(path)), "PATH")))
    assert len(answers) == 1, (target.name, answers)
    # Inside, a missing file is told apart: the user's own folder.
    missing = replay(target, layout.inside / "missing.sse")
    assert missing.status_code == 404 and "no such file" in error_of(missing)


# -- what never shows the token --------------------------------------------------------------------


def _cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


@pytest.mark.spawns
def test_the_token_is_never_shown(
    tmp_path: Path, replay_env: None, caplog: pytest.LogCaptureFixture
) -> None:
    token = sim.token()
    with caplog.at_level(logging.DEBUG):
        s = nito_nb.stream("hi", model="sim/echo", sim={"tps": 0}).wait()
        run = nito_nb.run(
            ["a"], model="sim/echo", progress=False, sim={"tps": 0}, store=str(tmp_path / "store")
        )
        run.wait(timeout=60)
    assert run.error is None
    s.save(tmp_path / "log.jsonl")
    shown = [
        repr(s),
        str(s.request),
        repr(s._route),
        str(s.frame().attrs),
        repr(run),
        caplog.text,
        repr(Simulator("http://127.0.0.1:1/v1", token)),
    ]
    assert not [text for text in shown if token in text]
    for file in tmp_path.rglob("*"):
        if file.is_file():
            assert token.encode() not in file.read_bytes(), file
    # Not on the command line of the Run's simulator process (ps shows it to every user), nor in
    # its environment.
    pid = _apart._shared.pid if _apart._shared is not None else None
    assert pid is not None
    assert token.encode() not in _cmdline(pid) + Path(f"/proc/{pid}/environ").read_bytes()


@pytest.mark.spawns
def test_the_token_reaches_worker_processes_off_their_command_line() -> None:
    # A simulator that wants this process's token: the worker's sim/ request gets through with it.
    with SimServer(api_key=sim.token()) as url:
        engine = ProcessEngine(1, 4, {}, ["sim/echo"], simulator=Simulator(url, sim.token()))
        try:
            request = Request(
                key="k",
                row=0,
                model="sim/echo",
                repeat=0,
                messages=[{"role": "user", "content": "hi"}],
                params={"sim": {"tps": 0}},
            )
            sent = asyncio.run(engine.send(request))
            assert sent.stream.status == "done" and sent.stream.content == "hi", sent.stream.error
            (worker,) = engine._workers.values()
            assert sim.token().encode() not in _cmdline(worker.process.pid)
        finally:
            engine.close()


# -- python -m nito_nb.sim: the key off the command line, the replay directories -------------------


@pytest.mark.spawns
def test_the_cli_takes_its_key_from_a_file_off_the_command_line(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(CLI_KEY + "\n")  # as echo writes it
    with cli(["--api-key-file", str(key_file)], key=CLI_KEY) as (base, process):
        assert CLI_KEY.encode() not in _cmdline(process.pid)
        assert httpx.get(f"{base}/models").status_code == 401
        assert "--api-key-file" in error_of(httpx.get(f"{base}/models"))
        assert (
            httpx.get(f"{base}/models", headers={"Authorization": f"Bearer {CLI_KEY}"}).status_code
            == 200
        )
        s = nito_nb.stream("hi", model="sim/echo", base_url=base, api_key=CLI_KEY)
        assert s.wait().content == "hi"
    # --api-key stays, and works as before.
    with cli(["--api-key", CLI_KEY], key=CLI_KEY) as (base, _):
        assert httpx.get(f"{base}/models").status_code == 401
        assert (
            httpx.get(f"{base}/models", headers={"Authorization": f"Bearer {CLI_KEY}"}).status_code
            == 200
        )
    helped = subprocess.run(
        [sys.executable, "-m", "nito_nb.sim", "--help"], capture_output=True, text=True, check=True
    )
    help_text = " ".join(helped.stdout.split())
    assert "--api-key-file" in help_text and "NITO_SIM_API_KEY" in help_text and "(ps)" in help_text
    assert "--replay-dir" in help_text


@pytest.mark.spawns
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--api-key-file", "/nonexistent/key"], "--api-key-file: cannot read '/nonexistent/key'"),
        (["--api-key-file", "EMPTY"], "holds no key"),
        (["--api-key", "k", "--api-key-file", "EMPTY"], "not allowed with argument"),
        (
            ["--replay-dir", "/nonexistent/dir"],
            "--replay-dir: '/nonexistent/dir' is not a directory",
        ),
    ],
)
def test_the_cli_refuses_a_bad_key_file_or_replay_dir_in_one_line(
    tmp_path: Path, args: list[str], says: str
) -> None:
    (tmp_path / "empty").write_text("\n")
    args = [str(tmp_path / "empty") if a == "EMPTY" else a for a in args]
    done = subprocess.run(
        [sys.executable, "-m", "nito_nb.sim", "--port", str(_free_port()), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr


@pytest.mark.spawns
def test_the_cli_replays_under_its_replay_dirs_default_the_working_directory(
    layout: Layout, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "two.sse").write_bytes(RECORDING.read_bytes())
    with cli([], cwd=layout.inside) as (base, _):  # no --replay-dir: the working directory
        target = Target("cwd", base, "", "")
        assert replay(target, "ok.sse").status_code == 200  # relative: from the working directory
        assert replay(target, layout.inside / "ok.sse").status_code == 200
        assert replay(target, other / "two.sse").status_code == 403
        assert replay(target, layout.outside / "secret.sse").status_code == 403
        os.mkfifo(layout.inside / "fifo.sse")  # refused at once, not a read that waits for a writer
        try:
            assert replay(target, layout.inside / "fifo.sse").status_code == 404
        finally:
            (layout.inside / "fifo.sse").unlink()
    with cli(["--replay-dir", str(layout.inside), "--replay-dir", str(other)], cwd=tmp_path) as (
        base,
        _,
    ):
        target = Target("dirs", base, "", "")
        assert replay(target, layout.inside / "ok.sse").status_code == 200
        assert replay(target, other / "two.sse").status_code == 200
        assert replay(target, layout.inside / "steal.sse").status_code == 403


# -- the rules themselves --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "local", "allowed"),
    [
        ("127.0.0.1:8765", "127.0.0.1", True),
        ("localhost:8765", "127.0.0.1", True),
        ("localhost.", None, True),
        ("[::1]:8765", "::1", True),
        ("::1", None, True),
        ("127.9.9.9", "127.0.0.1", True),
        ("[::ffff:127.0.0.1]:1", None, True),
        # A wildcard bind (0.0.0.0): the address the connection arrived on, never a name for it.
        ("192.168.1.20:8765", "192.168.1.20", True),
        ("192.168.1.20:8765", "127.0.0.1", False),
        ("myhost.lan:8765", "192.168.1.20", False),
        ("attacker.example", "127.0.0.1", False),
        ("localhost.attacker.example", "127.0.0.1", False),
        ("127.0.0.1.nip.io", "127.0.0.1", False),
        ("", "127.0.0.1", False),
        (None, "127.0.0.1", False),
    ],
)
def test_which_hosts_are_answered(host: str | None, local: str | None, allowed: bool) -> None:
    assert _access.host_allowed(host, local) is allowed


def test_the_read_never_follows_a_link_swapped_in_after_the_check(tmp_path: Path) -> None:
    # The check resolves the path; the read then opens it one component at a time without following
    # links. A folder swapped for a link to elsewhere in between is refused, not followed.
    inside, elsewhere = tmp_path / "inside", tmp_path / "elsewhere"
    (inside / "recordings").mkdir(parents=True)
    elsewhere.mkdir()
    (elsewhere / "a.sse").write_text(MARKER)
    (inside / "recordings" / "a.sse").write_text("data: ok\n\n")
    real = str(inside / "recordings" / "a.sse")
    assert _files._read(str(inside), real) == b"data: ok\n\n"
    (inside / "recordings" / "a.sse").unlink()
    (inside / "recordings").rmdir()
    (inside / "recordings").symlink_to(elsewhere)  # the swap
    with pytest.raises(OSError):
        _files._read(str(inside), real)
    (elsewhere / "b.sse").write_text(MARKER)
    (inside / "b.sse").symlink_to(elsewhere / "b.sse")
    with pytest.raises(OSError):
        _files._read(str(inside), str(inside / "b.sse"))
