"""`python -m nito_nb.sim --port 8765 [--host 127.0.0.1] [--api-key-file PATH] [--replay-dir DIR]...
[--capacity slots=4,queue=8,...]`."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ._capacity import CAPACITY_VARIABLE, NAMES, Capacity, parse_capacity, parse_spec
from ._files import REPLAY_DIRS_VARIABLE
from ._scenarios import SIM_MODELS

KEY_HINT = "the key given to --api-key, --api-key-file or NITO_SIM_API_KEY"


def _key_from_file(parser: argparse.ArgumentParser, path: str) -> str:
    """The key in ``path``: its first line, without the line break an editor or ``echo`` adds."""
    try:
        lines = Path(path).expanduser().read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        parser.error(
            f"--api-key-file: cannot read {path!r}: {exc.strerror if isinstance(exc, OSError) else exc}"
        )
    key = lines[0].strip() if lines else ""
    if not key:
        parser.error(f"--api-key-file: {path!r} holds no key (its first line is empty)")
    return key


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m nito_nb.sim",
        description="Serve nito_nb's simulated Nito gateway (OpenAI-compatible, streaming). It answers "
        "only requests addressed to a loopback name or address (or the address it listens on: an "
        "address, never a DNS name) and POST bodies sent as application/json.",
        epilog="Pacing defaults: NITO_SIM_TPS (tokens/s, 0 = as fast as possible), "
        f"NITO_SIM_TTFT_MS, NITO_SIM_JITTER; the capacity's: {CAPACITY_VARIABLE} (as --capacity). "
        "Models: " + ", ".join(SIM_MODELS),
    )
    parser.add_argument("--port", type=int, default=8765, help="default: 8765")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="default: 127.0.0.1 (another address exposes the simulator, and its replay of the "
        ".sse/.jsonl files under --replay-dir, to the network; 0.0.0.0 answers requests to any "
        "of this machine's addresses, by address)",
    )
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument(
        "--api-key",
        metavar="KEY",
        help="require `Authorization: Bearer KEY`. Every user of this machine can read a command "
        "line (ps): prefer --api-key-file or NITO_SIM_API_KEY",
    )
    keys.add_argument(
        "--api-key-file",
        metavar="PATH",
        help="require the key on the first line of this file (default: $NITO_SIM_API_KEY, else no key)",
    )
    parser.add_argument(
        "--replay-dir",
        action="append",
        metavar="DIR",
        help="sim/replay reads .sse/.jsonl files under this folder only, never through a link out "
        f"of it; repeat for several (default: ${REPLAY_DIRS_VARIABLE}, folders separated by "
        f"{os.pathsep!r}, else the working directory)",
    )
    parser.add_argument(
        "--capacity",
        metavar="NAME=NUMBER,...",
        help="the capacity of sim/server and of requests with sim.capacity (docs/SIMULATOR.md): "
        f"any of {', '.join(NAMES)}, such as slots=8,queue=16 (default: ${CAPACITY_VARIABLE}, "
        f"else slots={Capacity.slots},queue={Capacity.queue})",
    )
    args = parser.parse_args(argv)
    if args.capacity is not None:
        try:
            parse_capacity(parse_spec(args.capacity), Capacity())
        except ValueError as exc:
            parser.error(f"--capacity: {exc}")
        # One rule for both: the app reads the variable at each request, as it reads the pace's.
        os.environ[CAPACITY_VARIABLE] = args.capacity
    for folder in args.replay_dir or ():
        if not Path(folder).expanduser().is_dir():
            parser.error(f"--replay-dir: {folder!r} is not a directory")
    key: str | None
    if args.api_key_file is not None:
        key = _key_from_file(parser, args.api_key_file)
    else:
        key = args.api_key or os.environ.get("NITO_SIM_API_KEY") or None
    print(f"nito_nb simulator: base URL http://{args.host}:{args.port}/v1", flush=True)
    from ._server import serve

    serve(args.port, args.host, key, args.replay_dir, key_hint=KEY_HINT)


if __name__ == "__main__":
    main()
