"""A loopback HTTP server that answers with scripted bytes, for the client tests.

The simulator speaks the protocol correctly; these tests also need the server to misbehave
precisely: split a body at an awkward byte, pause between two reads, cut the connection, answer
HTML or a 429 with Retry-After. Each script is registered under a path and served by a real
uvicorn server on 127.0.0.1, so httpx goes through its real network stack.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route


@dataclass
class Script:
    status: int = 200
    parts: list[bytes] = field(default_factory=list)
    delays: list[float] = field(default_factory=list)  # seconds to sleep before each part
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False  # cut the connection after the parts (no clean end of the chunked body)
    header_delay: float = 0.0  # seconds before the response starts
    times: int = 0  # how many requests hit this script
    requests: list[dict] = field(default_factory=list)  # received JSON bodies and headers


class _Drop(Exception):
    pass


class ScriptedServer:
    def __init__(self) -> None:
        self.scripts: dict[str, list[Script]] = {}
        app = Starlette(routes=[Route("/{path:path}", self._handle, methods=["GET", "POST"])])
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="critical", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ScriptedServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("scripted server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def add(self, path: str, *scripts: Script) -> str:
        """Serve ``scripts`` in turn at ``/path`` (the last one repeats); return the base URL."""
        self.scripts[path.strip("/")] = list(scripts)
        return f"{self.url}/{path.strip('/')}"

    async def _handle(self, request: Request) -> Response:
        path = request.path_params["path"]
        base = path.rsplit("/chat/completions", 1)[0].rsplit("/models", 1)[0]
        queue = self.scripts.get(base)
        if not queue:
            return Response(b'{"error": {"message": "no script"}}', status_code=404)
        script = queue[0] if len(queue) == 1 else queue.pop(0)
        script.times += 1
        body = await request.body()
        script.requests.append({"body": body, "headers": dict(request.headers)})
        if script.header_delay:
            await asyncio.sleep(script.header_delay)
        if script.status != 200 or script.content_type != "text/event-stream":
            return Response(
                b"".join(script.parts),
                status_code=script.status,
                media_type=script.content_type,
                headers=script.headers,
            )

        async def body_parts() -> AsyncIterator[bytes]:
            for i, part in enumerate(script.parts):
                if i < len(script.delays) and script.delays[i]:
                    await asyncio.sleep(script.delays[i])
                yield part
            if script.drop:
                raise _Drop("cut on purpose")

        return StreamingResponse(
            body_parts(), status_code=200, media_type=script.content_type, headers=script.headers
        )
