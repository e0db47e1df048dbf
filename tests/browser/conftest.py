"""Fixtures for the real-browser tests (JupyterLab + Debian Chromium); the harness is in lab.py.

    def test_something(lab):
        lab.write_notebook("x", ["%%nito\\nhello"])
        nb = lab.open("x", kernel_env={"NITO_SIM_TPS": "50"})
        nb.run_cell(0, wait=True)
        assert "hello" in nb.output_text(0)
        nb.assert_no_xss()

The server and the browser are session-scoped (starting them costs ~3 s + ~1 s, and the whole CI
must fit in 90 minutes on 2 cores); each test gets fresh browser contexts and no running kernels.
Each `lab.open()` costs ~5 s (JupyterLab boot + kernel start, measured; a shared browser context
does not make it faster), so check several things in one notebook rather than one per test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import lab as harness  # the fixture below is called `lab`, hence the alias

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Every test under tests/browser is a browser test. Without chromium it is skipped on a dev
    # machine, but never in CI (CI is set): there `make test` installs chromium first
    # (browser-deps), so a missing one must fail loudly (the `browser` fixture does that).
    reason = harness.chromium_missing_reason()
    skip = None
    if reason and not os.environ.get("CI"):
        skip = pytest.mark.skip(reason=f"browser test: {reason}; with CI set this fails")
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.browser)
            if skip is not None:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """A headless Playwright `Browser` (Debian Chromium), shared by the whole session."""
    reason = harness.chromium_missing_reason()
    if reason:
        pytest.fail(f"CI is set but {reason}", pytrace=False)
    with harness.chromium() as b:
        yield b


@pytest.fixture(scope="session")
def lab_server() -> Iterator[harness.LabServer]:
    """An isolated JupyterLab (temp HOME and Jupyter dirs, venv kernel), shared by the session."""
    with harness.lab_server() as server:
        yield server


@pytest.fixture
def lab(browser: Any, lab_server: harness.LabServer) -> Iterator[harness.Lab]:
    # `browser` first: in CI without chromium it fails before we spend 3 s starting the server.
    """A `Lab` for one test; afterwards its pages are closed and all kernels shut down."""
    lab = harness.Lab(lab_server, browser)
    try:
        yield lab
    finally:
        lab.close()


@pytest.fixture(scope="session")
def notebook7_server() -> Iterator[harness.LabServer]:
    """An isolated Notebook 7 server (`jupyter notebook`), started only by tests that use it."""
    with harness.lab_server(app="notebook") as server:
        yield server


@pytest.fixture
def notebook7(browser: Any, notebook7_server: harness.LabServer) -> Iterator[harness.Lab]:
    """Like `lab`, on Notebook 7: `open()` shows the notebook in Notebook 7's own page."""
    lab = harness.Lab(notebook7_server, browser)
    try:
        yield lab
    finally:
        lab.close()
