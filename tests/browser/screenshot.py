"""Take a screenshot of a notebook running in a real JupyterLab (e.g. the README's live answer).

    .venv/bin/python tests/browser/screenshot.py --out docs/live.png --when 2.5 \\
        --env NITO_SIM_TPS=40 --cell 'import nito_nb' --cell $'%%nito\\nExplain IOPub'

--when: "done" (default: every cell finished), seconds after Run All (a mid-stream answer),
or a CSS selector to wait for. In a pytest test, use `lab.take_screenshot` with the `lab` fixture
instead: `take_screenshot(lab, cells, path, when=2.5, kernel_env={...})`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

# Run as a script, this file's folder is on sys.path (and under pytest, conftest's folder is).
from lab import Lab, chromium, lab_server, take_screenshot


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", required=True, type=Path, help="PNG to write")
    ap.add_argument("--cell", action="append", required=True, help="a code cell (repeatable)")
    ap.add_argument("--when", default="done", help='"done", seconds, or a CSS selector')
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the kernel")
    ap.add_argument(
        "--element",
        default=".jp-NotebookPanel",
        help='CSS selector to shoot (e.g. ".jp-Cell"); "page" for the whole page',
    )
    ap.add_argument("--width", type=int, default=1100)
    ap.add_argument("--height", type=int, default=700)
    ap.add_argument("--scale", type=float, default=2, help="device scale factor (2: crisp)")
    args = ap.parse_args(argv)

    when: str | float = args.when
    try:
        when = float(args.when)
    except ValueError:
        pass
    env = dict(kv.split("=", 1) for kv in args.env)
    with lab_server() as server, chromium() as browser:
        lab = Lab(
            server, browser, viewport=(args.width, args.height), device_scale_factor=args.scale
        )
        try:
            element = None if args.element == "page" else args.element
            path = take_screenshot(
                lab, args.cell, args.out, when=when, kernel_env=env, element=element
            )
        finally:
            lab.close()
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
