"""Real-browser harness: an isolated JupyterLab server driven by Debian's Chromium via Playwright.

Usable from pytest (see conftest.py) and from plain scripts (see screenshot.py)::

    with lab_server() as server, chromium() as browser:
        lab = Lab(server, browser)
        lab.write_notebook("demo", ["print('hi')"])
        nb = lab.open("demo")
        nb.run_cell(0)
        nb.wait_cell_done(0)
        assert nb.output_text(0) == "hi"
        lab.close()

The choices below follow the measurements in docs/JUPYTER.md ("A real-browser test
here, and its pitfalls"); comments cite the pitfall that drove each of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
# Never `playwright install` (no outside downloads): Debian's chromium with these flags keeps the
# headless browser from phoning home or needing a sandbox as root.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
KERNEL_NAME = "python3"
KERNEL_DISPLAY_NAME = "Python 3 (ipykernel)"
KERNELSPEC_METADATA = {
    "name": KERNEL_NAME,
    "display_name": KERNEL_DISPLAY_NAME,
    "language": "python",
}
XSS_PAYLOAD = '<img src=x onerror="window.__xss=1"><script>window.__xss2=1</script>'

_PROMPT_DONE = re.compile(r"^\[\d+\]:$")
_CELLS = ".jp-NotebookPanel .jp-Notebook .jp-Cell"

# Ready means all three: the status bar's kernel item reads "| Idle" (the toolbar's idle indicator
# lies on a cold load), a cell exists, and no dialog is open. An open dialog (e.g. "Select Kernel")
# also ends the wait, so that we can fail fast with its text instead of timing out.
_READY_JS = """() => {
  if (document.querySelector('.jp-Dialog')) return 'dialog';
  const bar = document.querySelector('#jp-main-statusbar');
  // JupyterLab says it in its status bar; Notebook 7 has none, its toolbar's indicator says it.
  const indicator = document.querySelector('.jp-NotebookPanel .jp-Notebook-ExecutionIndicator');
  const idle = (!!bar && bar.textContent.includes('| Idle')) ||
    (!bar && !!indicator && indicator.dataset.status === 'idle');
  const cell = !!document.querySelector('.jp-NotebookPanel .jp-Cell');
  return idle && cell ? 'ready' : false;
}"""


def _free_port() -> int:
    # The port can in theory be taken between close() and the server's bind; the server runs with
    # port_retries=0 so that shows up as a clear start failure instead of a silent other port.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """A running `jupyter lab` in its own temporary HOME; see `lab_server()`."""

    def __init__(
        self,
        base: Path,
        port: int,
        token: str,
        proc: subprocess.Popen,
        log_path: Path,
        app: str = "lab",
    ):
        self.base = base
        self.app = app
        self.root_dir = base / "root"
        self.port = port
        self.token = token
        self.url = f"http://127.0.0.1:{port}"
        self.proc = proc
        self.log_path = log_path
        self.kernelspec_path = base / "data" / "kernels" / KERNEL_NAME / "kernel.json"

    def api(self, method: str, path: str, body: Any = None, timeout: float = 10) -> Any:
        """Call the REST API; returns the decoded JSON body (None when empty)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"token {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def set_kernel_env(self, env: dict[str, str] | None) -> None:
        """Extra environment for kernels started from now on (e.g. {"NITO_SIM_TPS": "50"}).

        The server (session-scoped) already passes its own environment, i.e. os.environ at start,
        to kernels. Variables a test sets later cannot reach that process, but jupyter_client reads
        kernel.json from disk on every kernel start, and its "env" overrides the inherited one.
        """
        spec = json.loads(self.kernelspec_path.read_text())
        spec["env"] = dict(env or {})
        self.kernelspec_path.write_text(json.dumps(spec, indent=1))

    def listing(self, path: str, patience: float = 5) -> Any:
        """GET a list (``/api/kernels``, ``/api/sessions``), asking again after a 500 for a while:
        jupyter_server fails to list a kernel that is still starting (see Lab._an_idle_connected_kernel)."""
        deadline = time.monotonic() + patience
        while True:
            try:
                return self.api("GET", path)
            except urllib.error.HTTPError as exc:
                if exc.code < 500 or time.monotonic() > deadline:
                    raise
            time.sleep(0.1)

    def shutdown_all_kernels(self) -> None:
        """Delete every session, then any kernel left without one."""
        for session in self.listing("/api/sessions"):
            with contextlib.suppress(urllib.error.HTTPError):
                self.api("DELETE", f"/api/sessions/{session['id']}")
        for kernel in self.listing("/api/kernels"):
            with contextlib.suppress(urllib.error.HTTPError):
                self.api("DELETE", f"/api/kernels/{kernel['id']}")

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no server log)"


def _isolated_env(base: Path) -> dict[str, str]:
    """The server's environment: ours (so kernels get e.g. NITO_SIM_TPS), with every place Jupyter,
    IPython and platformdirs (XDG_*) read user state from pointed into `base`."""
    env = dict(os.environ)
    dirs = {
        "HOME": "home",
        "JUPYTER_CONFIG_DIR": "config",
        "JUPYTER_DATA_DIR": "data",
        "JUPYTER_RUNTIME_DIR": "runtime",
        "IPYTHONDIR": "ipython",
        "JUPYTERLAB_SETTINGS_DIR": "lab-settings",
        "JUPYTERLAB_WORKSPACES_DIR": "lab-workspaces",
        "XDG_CONFIG_HOME": "xdg-config",
        "XDG_DATA_HOME": "xdg-data",
        "XDG_CACHE_HOME": "xdg-cache",
        "XDG_STATE_HOME": "xdg-state",
        "XDG_RUNTIME_DIR": "xdg-runtime",
    }
    for var, sub in dirs.items():
        path = base / sub
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        env[var] = str(path)
    # A user's JUPYTER_PATH / config path would add kernels or extensions we did not choose.
    for var in ("JUPYTER_PATH", "JUPYTER_CONFIG_PATH"):
        env.pop(var, None)
    # In a venv jupyter_core puts the venv's share/jupyter before the user dirs, so the venv's own
    # "python3" kernelspec would shadow ours (and its kernel_env) - measured: env never arrived.
    env["JUPYTER_PREFER_ENV_PATH"] = "0"
    env["JUPYTER_PLATFORM_DIRS"] = "1"  # silences the "migrating its paths" warning in the log
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _write_config(base: Path, env: dict[str, str]) -> None:
    # Kernel: the Python running us (the venv's), so `import nito_nb` works in the notebook. The
    # user data dir comes first on the kernel search path, so this shadows any other "python3".
    kernel_dir = Path(env["JUPYTER_DATA_DIR"]) / "kernels" / KERNEL_NAME
    kernel_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": KERNEL_DISPLAY_NAME,
        "language": "python",
        "env": {},
        "metadata": {"nito_test_harness": True},  # lets lab_server() check it is the one in use
    }
    (kernel_dir / "kernel.json").write_text(json.dumps(spec, indent=1))

    # Windowing off: with it on, off-screen cells are not in the DOM, so indexing
    # `.jp-Notebook .jp-Cell` would silently address the wrong cell.
    settings = Path(env["JUPYTERLAB_SETTINGS_DIR"])
    tracker = settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))
    # No news/update toasts covering the notebook in screenshots (belt and braces with the flags).
    notif = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notif.parent.mkdir(parents=True)
    notif.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))


@contextlib.contextmanager
def lab_server(start_timeout: float = 60, app: str = "lab") -> Iterator[LabServer]:
    """Start an isolated JupyterLab (``app="lab"``) or Notebook 7 (``app="notebook"``, the same
    front-end components in a one-document shell); stop it (and its kernels) on exit."""
    base = Path(tempfile.mkdtemp(prefix="nito-lab-"))
    env = _isolated_env(base)
    _write_config(base, env)
    (base / "root").mkdir()
    port, token = _free_port(), secrets.token_hex(16)
    cmd = [
        sys.executable,
        "-m",
        {"lab": "jupyterlab", "notebook": "notebook"}[app],
        "--no-browser",
        "--allow-root",  # as root, jupyter exits without it
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={base / 'root'}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        # The default "pypi" extension manager may query pypi.org: no outside network in tests.
        "--LabApp.extension_manager=readonly",
    ]
    log_path = base / "server.log"
    try:
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                cmd,
                env=env,
                cwd=base / "root",
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            server = LabServer(base, port, token, proc, log_path, app)
            try:
                _wait_until_up(server, start_timeout)
                spec = server.api("GET", "/api/kernelspecs")["kernelspecs"][KERNEL_NAME]["spec"]
                if not spec.get("metadata", {}).get("nito_test_harness"):
                    raise RuntimeError(f"another {KERNEL_NAME!r} kernelspec shadows ours: {spec}")
                yield server
            finally:
                _stop(server)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _wait_until_up(server: LabServer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if server.proc.poll() is not None:
            raise RuntimeError(
                f"jupyter lab exited with {server.proc.returncode}:\n{server.log_tail()}"
            )
        try:
            server.api("GET", "/api/status", timeout=2)
            return
        except OSError:  # URLError, ConnectionRefused, timeouts: not up yet
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"jupyter lab did not answer in {timeout} s:\n{server.log_tail()}"
                ) from None
            time.sleep(0.1)


def _stop(server: LabServer) -> None:
    proc = server.proc
    if proc.poll() is None:
        # Kernels run in their own process groups: shut them down through the server first so
        # none outlives it, then stop the server itself gracefully (SIGTERM), then hard.
        with contextlib.suppress(OSError, urllib.error.URLError, ValueError):
            server.shutdown_all_kernels()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            proc.wait(timeout=10)
    else:
        proc.wait()


def chromium_missing_reason() -> str | None:
    if not os.path.exists(CHROMIUM):
        return (
            f"{CHROMIUM} is missing (install it: `make browser-deps` or apt-get install chromium)"
        )
    return None


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Debian Chromium driven by Playwright's sync API (a `playwright` Browser)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


class NotebookPage:
    """One open notebook in its own browser context. Cell indices are 0-based."""

    def __init__(self, page: Any, timeout: float = 30):
        self.page = page
        self.timeout = timeout
        self._before: dict[int, str] = {}  # prompt text when we last asked a cell to run

    # -- locators -------------------------------------------------------------------------------
    def cell(self, i: int) -> Any:
        return self.page.locator(_CELLS).nth(i)

    def prompt(self, i: int) -> str:
        return self.cell(i).locator(".jp-InputPrompt").inner_text().strip()

    def cell_count(self) -> int:
        return self.page.locator(_CELLS).count()

    # -- running --------------------------------------------------------------------------------
    def run_cell(self, i: int, wait: bool = False, timeout: float | None = None) -> None:
        """Select cell i and run it with Ctrl+Enter.

        Ctrl+Enter ("run, don't advance"), not Shift+Enter: on the last cell Shift+Enter inserts a
        new empty cell, which shifts nothing but dirties the notebook and the screenshots.
        """
        self._before[i] = self.prompt(i)
        self.cell(i).locator(".jp-InputPrompt").click()  # selects the cell, command mode
        self.page.keyboard.press("Control+Enter")
        if wait:
            self.wait_cell_done(i, timeout)

    def run_all(self, wait: bool = False, timeout: float | None = None) -> None:
        """Run > Run All Cells, through the menu (there is no default shortcut)."""
        n = self.cell_count()
        for i in range(n):
            self._before[i] = self.prompt(i)
        self.page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
        self.page.locator('.lm-Menu-item[data-command="runmenu:run-all"]').click()
        if wait:
            for i in range(n):
                self.wait_cell_done(i, timeout)

    def wait_cell_done(self, i: int, timeout: float | None = None) -> str:
        """Wait until cell i's input prompt reads `[n]:` (and, if we ran it, a new n).
        Returns the prompt."""
        before = self._before.get(i)
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            text = self.prompt(i)
            if _PROMPT_DONE.match(text) and text != before:
                self._before.pop(i, None)
                return text
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"cell {i} not done after {timeout or self.timeout} s: "
                    f"prompt {text!r}, output {self.output_text(i)!r}"
                )
            time.sleep(0.05)

    # -- reading --------------------------------------------------------------------------------
    def output_text(self, i: int) -> str:
        area = self.cell(i).locator(".jp-Cell-outputArea")
        return area.inner_text().strip() if area.count() else ""

    def output_html(self, i: int) -> str:
        area = self.cell(i).locator(".jp-Cell-outputArea")
        return area.inner_html() if area.count() else ""

    def eval(self, js: str, arg: Any = None) -> Any:
        return self.page.evaluate(js, arg)

    def click(self, selector: str, **kwargs: Any) -> None:
        self.page.click(selector, **kwargs)

    def screenshot(self, path: str | Path, element: str | None = ".jp-NotebookPanel") -> Path:
        """Screenshot the notebook panel (or any `element` selector; None: the whole page)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if element is None:
            self.page.screenshot(path=str(path))
        else:
            self.page.locator(element).first.screenshot(path=str(path))
        return path

    # -- XSS sentinel ---------------------------------------------------------------------------
    def xss_sentinels(self) -> list[Any]:
        """[window.__xss, window.__xss2]: set by XSS_PAYLOAD's <img onerror> and <script>."""
        return self.page.evaluate("() => [window.__xss, window.__xss2]")

    def assert_no_xss(self) -> None:
        assert_no_xss(self.page)


def assert_no_xss(page: Any) -> None:
    """Fail if XSS_PAYLOAD (or any payload setting window.__xss/__xss2) executed in `page`."""
    values = page.evaluate("() => [window.__xss, window.__xss2]")
    assert values == [None, None], f"model text executed as code: [__xss, __xss2] = {values}"


class Lab:
    """Notebooks on a `LabServer`, opened in a Playwright `Browser`. Call close() when done."""

    def __init__(
        self,
        server: LabServer,
        browser: Any,
        viewport: tuple[int, int] = (1280, 900),
        device_scale_factor: float = 1,
        timeout: float = 30,
    ):
        self.server = server
        self.browser = browser
        self.viewport = viewport
        self.device_scale_factor = device_scale_factor
        self.timeout = timeout
        self._contexts: list[Any] = []
        self.pages: list[NotebookPage] = []  # every NotebookPage opened, latest last

    @property
    def root_dir(self) -> Path:
        return self.server.root_dir

    def write_notebook(self, name: str, cells: list[str]) -> Path:
        """Write an nbformat v4 notebook of code cells into the server root; returns its path.

        metadata.kernelspec is set: without it JupyterLab opens a "Select Kernel" dialog.
        """
        import nbformat

        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = dict(KERNELSPEC_METADATA)
        nb.metadata["language_info"] = {"name": "python"}
        nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
        path = self.root_dir / _ipynb(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(path))
        return path

    def open(self, name: str, kernel_env: dict[str, str] | None = None) -> NotebookPage:
        """Open NAME.ipynb in a fresh browser context and wait until its kernel is idle.

        kernel_env: extra environment for this notebook's kernel (see LabServer.set_kernel_env).
        """
        if kernel_env is not None:
            self.server.set_kernel_env(kernel_env)
        ctx = self.browser.new_context(
            viewport={"width": self.viewport[0], "height": self.viewport[1]},
            device_scale_factor=self.device_scale_factor,
        )
        self._contexts.append(ctx)
        ctx.set_default_timeout(self.timeout * 1000)
        page = ctx.new_page()
        # `reset` drops any saved workspace so every test starts from the same layout.
        where = "lab/tree" if self.server.app == "lab" else "notebooks"
        page.goto(f"{self.server.url}/{where}/{_ipynb(name)}?token={self.server.token}&reset")
        if self.server.proc.poll() is not None:
            raise RuntimeError(f"jupyter lab has died:\n{self.server.log_tail()}")
        try:
            state = page.wait_for_function(_READY_JS, timeout=self.timeout * 1000 * 2).json_value()
        except Exception as exc:  # a Playwright TimeoutError: say what the page was showing
            bar = page.locator("#jp-main-statusbar")
            bar_text = bar.inner_text(timeout=1000) if bar.count() else "(no status bar)"
            raise RuntimeError(
                f"{name} not ready after {self.timeout * 2} s; status bar: "
                f"{bar_text!r}; server log:\n{self.server.log_tail()}"
            ) from exc
        if state == "dialog":
            text = page.locator(".jp-Dialog").first.inner_text()
            raise RuntimeError(f"a dialog blocked {name}: {text!r}")
        if self.server.app == "notebook":
            # Notebook 7's indicator reads idle before any kernel exists, and a cell run then is
            # lost (measured): wait for the server to see an idle kernel with the page connected.
            deadline = time.monotonic() + self.timeout * 2
            while not self._an_idle_connected_kernel():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no kernel for {name}:\n{self.server.log_tail()}")
                time.sleep(0.1)
        nb = NotebookPage(page, self.timeout)
        self.pages.append(nb)
        return nb

    def _an_idle_connected_kernel(self) -> bool:
        # Seen once in CI: a 500 from /api/kernels while the page's kernel was starting.
        # jupyter_server lists a kernel as soon as it is registered but gives it `execution_state`
        # and `last_activity` only after its start is awaited; its listing fails in between.
        kernels = self.server.listing("/api/kernels", patience=self.timeout)
        return any(k["execution_state"] == "idle" and k["connections"] > 0 for k in kernels)

    def shutdown_all_kernels(self) -> None:
        self.server.shutdown_all_kernels()

    def close(self) -> None:
        """Close our pages first (so the front end does not try to restart kernels), then shut
        the kernels down and forget any per-test kernel environment."""
        self.pages.clear()
        while self._contexts:
            self._contexts.pop().close()
        self.shutdown_all_kernels()
        self.server.set_kernel_env(None)


def _ipynb(name: str) -> str:
    return name if name.endswith(".ipynb") else f"{name}.ipynb"


def take_screenshot(
    lab: Lab,
    notebook_cells: list[str],
    path: str | Path,
    when: str | float | Callable[[NotebookPage], bool] = "done",
    name: str = "screenshot",
    kernel_env: dict[str, str] | None = None,
    element: str | None = ".jp-NotebookPanel",
    timeout: float = 60,
) -> Path:
    """Write `notebook_cells` as a notebook, run all its cells, and screenshot it at `when`:

    - "done": once every cell's prompt reads `[n]:` (the final state);
    - a float: that many seconds after the run started (a live, mid-stream answer);
    - any other string: a CSS selector; shoot as soon as it is visible;
    - a callable(NotebookPage) -> bool: polled every 50 ms until true.

    Returns the path. The page stays open as `lab.pages[-1]` until `lab.close()` (the `lab`
    fixture calls it), so a test can still inspect it.
    """
    lab.write_notebook(name, notebook_cells)
    nb = lab.open(name, kernel_env=kernel_env)
    start = time.monotonic()
    nb.run_all()
    if when == "done":
        for i in range(nb.cell_count()):
            nb.wait_cell_done(i, timeout)
    elif isinstance(when, (int, float)):
        time.sleep(max(0.0, start + when - time.monotonic()))
    elif isinstance(when, str):
        nb.page.locator(when).first.wait_for(state="visible", timeout=timeout * 1000)
    else:
        deadline = start + timeout
        while not when(nb):
            if time.monotonic() > deadline:
                raise TimeoutError(f"screenshot condition not met in {timeout} s")
            time.sleep(0.05)
    # The blinking cursor and hover states change pixels between runs: blur the editor.
    nb.eval("() => document.activeElement && document.activeElement.blur()")
    return nb.screenshot(path, element=element)
