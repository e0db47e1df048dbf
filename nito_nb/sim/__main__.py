"""`python -m nito_nb.sim --port 8765 [--host 127.0.0.1] [--api-key KEY]`."""

from __future__ import annotations

import argparse
import os

from ._scenarios import SIM_MODELS


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m nito_nb.sim",
        description="Serve nito_nb's simulated Nito gateway (OpenAI-compatible, streaming).",
        epilog="Pacing defaults: NITO_SIM_TPS (tokens/s, 0 = as fast as possible), "
        "NITO_SIM_TTFT_MS, NITO_SIM_JITTER. Models: " + ", ".join(SIM_MODELS),
    )
    parser.add_argument("--port", type=int, default=8765, help="default: 8765")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="default: 127.0.0.1 (another address exposes the simulator, and its replay of "
        "local .sse/.jsonl files, to the network)",
    )
    parser.add_argument(
        "--api-key",
        default=os.environ.get("NITO_SIM_API_KEY"),
        help="require `Authorization: Bearer KEY` (default: $NITO_SIM_API_KEY, else no key)",
    )
    args = parser.parse_args(argv)
    print(f"nito_nb simulator: base URL http://{args.host}:{args.port}/v1", flush=True)
    from ._server import serve

    serve(args.port, args.host, args.api_key)


if __name__ == "__main__":
    main()
