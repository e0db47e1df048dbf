"""Run one of the repository's notebooks headless and export it as HTML: the README's main job.

    python -m nito_nb.demo                       # notebooks/quickstart.ipynb -> out/quickstart.html
    python -m nito_nb.demo --notebook analysis --out out/analysis.html
    python -m nito_nb.demo --notebook path/to/any.ipynb --executed out/any.ipynb
    python -m nito_nb.demo --notebook analysis --figure knee-figure=docs/load-knee.png

The notebook runs top to bottom with nbclient in a fresh kernel of this interpreter (a kernelspec
written to a temporary folder for the run, so a ``python3`` kernel of another environment in the
user's Jupyter folders is never picked, and nothing is written there). Without ``NITO_API_KEY``
the notebooks use the embedded simulator; with it, they talk to Nito. ``NITO_SIM_TPS`` and
``NITO_SIM_TTFT_MS`` pass through as they are (the simulator's default pace is a few seconds per
answer; ``NITO_SIM_TPS=0`` runs as fast as possible).

The export is nbconvert's ``HTMLExporter``: each live answer is saved in its final state, as the
renderer's escaped HTML (model text never becomes markup). Exit status: 0 when every cell ran, 1 if
a cell raised (the export is still written, so you can read the error), 2 for a usage problem.

``--figure TAG=PATH`` also writes the image shown by the code cell tagged ``TAG`` to ``PATH`` (the
README's figures, ``make figures``): the PNG as the notebook showed it, with one text chunk that
names the notebook, the cell and a digest of the cell's source, so that a test can tell that a
committed figure is this command's output for the notebook as it is (its numbers are a run's).

This is a command for a clone of the repository: the notebooks live in ``notebooks/`` at its root,
not in the installed package.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import struct
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

__all__ = ["cell_figure", "figure_source", "main", "png_text", "run_notebook", "write_figure"]

NOTEBOOKS = ("quickstart", "analysis", "tools")
KERNEL_NAME = "nito-nb-demo"
DEFAULT_TIMEOUT_S = 300


class DemoError(Exception):
    """A problem the user can fix (a missing folder, a missing dependency): said in one message."""


def notebooks_dir() -> Path | None:
    """``notebooks/`` of the clone this package runs from (an editable install), or of the
    current folder; None when neither has one."""
    for root in (Path(__file__).resolve().parent.parent, Path.cwd()):
        folder = root / "notebooks"
        if folder.is_dir():
            return folder
    return None


def find_notebook(name: str) -> Path:
    """A notebook by short name (``quickstart``, ``analysis``, ``tools``) or by path."""
    if name not in NOTEBOOKS:
        path = Path(name).expanduser()
        if path.is_file():
            return path
        raise DemoError(
            f"no notebook {name!r}: give one of {', '.join(NOTEBOOKS)} or the path of an .ipynb file"
        )
    folder = notebooks_dir()
    if folder is None:
        raise DemoError(
            "the notebooks/ folder was not found (looked next to the nito_nb package and in the "
            "current folder). `python -m nito_nb.demo` runs the notebooks of a clone of the "
            "repository: run it from the clone (`make demo`), or pass --notebook PATH."
        )
    path = folder / f"{name}.ipynb"
    if not path.is_file():
        raise DemoError(f"{path} is missing from the clone")
    return path


def _kernel_manager(spec_dir: Path) -> Any:
    """A KernelManager for a kernelspec of this very interpreter, kept in ``spec_dir``."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    folder = spec_dir / "kernels" / KERNEL_NAME
    folder.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (nito_nb demo)",
        "language": "python",
    }
    (folder / "kernel.json").write_text(json.dumps(spec, indent=1))
    specs = KernelSpecManager(kernel_dirs=[str(spec_dir / "kernels")], ensure_native_kernel=False)
    # The connection file and the IPC sockets stay in the temporary folder too, not in the user's
    # runtime folder (IPC: a local kernel needs no TCP port, and ipykernel warns about plain TCP).
    return AsyncKernelManager(
        kernel_name=KERNEL_NAME,
        kernel_spec_manager=specs,
        transport="ipc",
        connection_file=str(spec_dir / "connection.json"),
    )


def _error_cells(nb: Any) -> list[tuple[int, str]]:
    """(position among code cells, "Name: value") of every cell with an error output."""
    errors = []
    code_cells = [cell for cell in nb.cells if cell.cell_type == "code"]
    for number, cell in enumerate(code_cells, 1):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                errors.append((number, f"{output.get('ename')}: {output.get('evalue')}"))
    return errors


def run_notebook(
    path: Path, *, timeout: float = DEFAULT_TIMEOUT_S, progress: bool = True
) -> tuple[Any, list[tuple[int, str]]]:
    """Execute the notebook at ``path`` in a fresh kernel; return it and its error cells.

    Every cell runs even after an error (so the export shows everything); the caller decides
    what an error means.
    """
    try:
        import nbformat
        from nbclient import NotebookClient
    except ImportError as exc:
        raise DemoError(
            f"{exc.name} is not installed: the demo needs the test extras "
            "(pip install -e '.[test]', or `make demo`, which installs them)"
        ) from None
    nb = nbformat.read(path, as_version=4)
    total = sum(cell.cell_type == "code" for cell in nb.cells)
    done = 0

    def on_cell_executed(cell: Any, cell_index: int, execute_reply: Any) -> None:
        nonlocal done
        done += 1
        if progress:
            failed = any(o.get("output_type") == "error" for o in cell.get("outputs", []))
            print(
                f"  cell {done}/{total}{'  ERROR' if failed else ''}", file=sys.stderr, flush=True
            )

    with tempfile.TemporaryDirectory(prefix="nito-nb-demo-") as spec_dir:
        client = NotebookClient(
            nb,
            km=_kernel_manager(Path(spec_dir)),
            timeout=timeout,
            allow_errors=True,
            # The notebook's cwd is its own folder (as in JupyterLab): relative paths hold.
            resources={"metadata": {"path": str(path.resolve().parent)}},
            on_cell_executed=on_cell_executed,
        )
        # The client shuts the kernel down when done (it would not for a manager it was given).
        client.execute(cleanup_kc=True)
    # The executed file names the kernel it is meant for, not the temporary one.
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    return nb, _error_cells(nb)


#: The PNG text keyword of a figure's provenance (``--figure``).
FIGURE_KEYWORD = "Source"
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def figure_source(notebook_name: str, cell_source: str, tag: str) -> str:
    """What a figure written by ``--figure`` says of where it comes from."""
    digest = hashlib.sha256(cell_source.encode("utf-8")).hexdigest()[:16]
    return f"python -m nito_nb.demo --figure: notebooks/{notebook_name}, cell {tag}, source sha256 {digest}"


def cell_figure(nb: Any, tag: str) -> tuple[bytes, str]:
    """The PNG shown by the code cell tagged ``tag`` (its last one) and the cell's source;
    DemoError when no cell has the tag or it showed no image."""
    cells = [
        c
        for c in nb.cells
        if c.cell_type == "code" and tag in c.get("metadata", {}).get("tags", [])
    ]
    if len(cells) != 1:
        raise DemoError(f"{len(cells)} code cells are tagged {tag!r}: tag exactly one")
    images = [
        o["data"]["image/png"]
        for o in cells[0].get("outputs", [])
        if "image/png" in o.get("data", {})
    ]
    if not images:
        raise DemoError(
            f"the cell tagged {tag!r} showed no image (did it fail? see the exported page)"
        )
    return base64.b64decode(images[-1]), cells[0].source


def _with_text(png: bytes, keyword: str, text: str) -> bytes:
    """``png`` with a tEXt chunk (Latin-1) right after its header chunk."""
    if not png.startswith(_PNG_SIGNATURE):
        raise DemoError("the figure is not a PNG")
    body = keyword.encode("latin-1") + b"\0" + text.encode("latin-1")
    chunk = (
        struct.pack(">I", len(body))
        + b"tEXt"
        + body
        + struct.pack(">I", zlib.crc32(b"tEXt" + body))
    )
    end_of_header = len(_PNG_SIGNATURE) + 8 + struct.unpack(">I", png[8:12])[0] + 4
    return png[:end_of_header] + chunk + png[end_of_header:]


def png_text(png: bytes) -> dict[str, str]:
    """The tEXt chunks of a PNG, keyword to text."""
    found, at = {}, len(_PNG_SIGNATURE)
    while at + 8 <= len(png):
        length, kind = struct.unpack(">I4s", png[at : at + 8])
        if kind == b"tEXt":
            keyword, _, text = png[at + 8 : at + 8 + length].partition(b"\0")
            found[keyword.decode("latin-1")] = text.decode("latin-1")
        at += 12 + length
    return found


def write_figure(nb: Any, notebook: Path, spec: str) -> Path:
    """``--figure TAG=PATH``: the tagged cell's PNG, stamped with where it comes from."""
    tag, equals, target = spec.partition("=")
    if not equals or not tag or not target:
        raise DemoError(f"--figure wants TAG=PATH (a cell tag and the PNG to write), got {spec!r}")
    png, source = cell_figure(nb, tag)
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_with_text(png, FIGURE_KEYWORD, figure_source(notebook.name, source, tag)))
    return path


def export_html(nb: Any, title: str) -> str:
    """The executed notebook as one HTML page (nbconvert's lab template, images inline)."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab")
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    return body


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nito_nb.demo",
        description="Run a nito_nb notebook headless (on the embedded simulator unless "
        "NITO_API_KEY is set) and export it as HTML with the answers' final state.",
    )
    parser.add_argument(
        "--notebook",
        default="quickstart",
        help=f"{', '.join(NOTEBOOKS)} (from notebooks/), or the path of an .ipynb file "
        "(default: quickstart)",
    )
    parser.add_argument(
        "--out", type=Path, help="the HTML file to write (default: out/NOTEBOOK.html)"
    )
    parser.add_argument("--executed", type=Path, help="also save the executed .ipynb here")
    parser.add_argument(
        "--figure",
        action="append",
        default=[],
        metavar="TAG=PATH",
        help="also write the image shown by the code cell tagged TAG to PATH (repeatable)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds one cell may take (default: {DEFAULT_TIMEOUT_S})",
    )
    args = parser.parse_args(argv)
    try:
        path = find_notebook(args.notebook)
        out = args.out or Path("out") / f"{path.stem}.html"
        on_nito = bool(os.environ.get("NITO_API_KEY"))
        where = (
            "Nito (NITO_API_KEY is set: real requests, billed to that key)"
            if on_nito
            else "the embedded simulator (NITO_API_KEY is unset)"
        )
        print(f"Running {_shown(path)} on {where}", file=sys.stderr, flush=True)
        started = time.perf_counter()
        nb, errors = run_notebook(path, timeout=args.timeout)
        seconds = time.perf_counter() - started
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(export_html(nb, path.stem), encoding="utf-8")
        if args.executed is not None:
            import nbformat

            args.executed.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, args.executed)
        figures = [write_figure(nb, path, spec) for spec in args.figure]
    except DemoError as exc:
        print(f"nito_nb.demo: {exc}", file=sys.stderr)
        return 2
    cells = sum(cell.cell_type == "code" for cell in nb.cells)
    print(f"Wrote {_shown(out)}: {cells} code cells in {seconds:.1f} s, {len(errors)} with errors")
    if args.executed is not None:
        print(f"Wrote {_shown(args.executed)}")
    for figure in figures:
        print(f"Wrote {_shown(figure)}")
    for number, error in errors:
        print(f"  code cell {number}: {error}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
