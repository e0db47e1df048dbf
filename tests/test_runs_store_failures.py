"""A run store on a disk that fills up, on a file system that refuses writes, or with a damaged
database: one line each, typed (``nito_nb.StoreError``), and nothing answered is lost.

Real file systems: a small tmpfs that really runs out of space, a tmpfs remounted read-only, a
read-only bind mount of a folder. Mounting needs root (CAP_SYS_ADMIN); where it is refused the
test is skipped and says so. Root ignores permission bits, hence read-only mounts rather than
``chmod``."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import nito_nb

#: Every test here starts a kernel or another process: `make check` leaves them to `make test`.
pytestmark = pytest.mark.spawns

#: Each answer is a few KB of body and about 200 events: 2 MiB hold a batch or two, not 300.
PROMPTS = [f"question {i}: " + "word " * 20 for i in range(300)]
OPTIONS = {
    "model": "sim/chat",
    "concurrency": 8,
    "progress": False,
    "max_tokens": 200,
    "sim": {"tps": 400, "ttft_ms": 0},
}


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True)


@contextlib.contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` at ``where``: a disk that really fills up. Skipped where mounting is
    not permitted (mount(2) needs CAP_SYS_ADMIN: root, or a container allowed to mount)."""
    where.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: a full disk is made with a small tmpfs")
    done = _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where))
    if done.returncode != 0:
        pytest.skip(
            f"mounting a tmpfs is not permitted here ({done.stderr.strip()}): the full and read-only "
            "disks of these tests are real mounts, which need root (CAP_SYS_ADMIN)"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _read_only(where: Path) -> None:
    done = _mount("-o", "remount,ro", str(where))
    assert done.returncode == 0, done.stderr


def test_a_full_disk_says_so_where_and_how_to_resume_and_the_run_keeps_its_results(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # Before: "TransactionContext Error: cannot rollback - no transaction is active" (the full disk
    # only in its __context__), and results() and frame() empty though requests had been answered.
    with _tmpfs(tmp_path / "disk", "2m") as disk:
        store = disk / "store"
        run = nito_nb.run(PROMPTS, store=str(store), **OPTIONS).wait(timeout=120)
        assert run.done
        error = run.error
        assert isinstance(error, nito_nb.StoreError), repr(error)
        message = str(error)
        assert "is full (No space left on device)" in message and repr(str(store)) in message
        assert f"run the same call again with store={str(store)!r} to resume it" in message
        assert "run.results(), run.frame()" in message and "\n" not in message
        err = capfd.readouterr().err
        said = [line for line in err.splitlines() if line.startswith("nito:")]
        assert said == [f"nito: the run stopped: {message}"], err
        assert "Traceback" not in err and "rollback" not in err

        # Nothing answered is lost: what the store took and what it could not are both there.
        results = run.results()
        answered = results[results["status"] == "done"]
        assert len(answered) >= 8, results["status"].value_counts()
        with nito_nb.open_store(store) as opened:
            stored = set(opened.results()["key"])
        # the store has the first batches, memory the rest
        assert stored and stored < set(results["key"])
        frame = run.frame()
        assert set(frame["stream"].astype(str)) == set(results["key"])
        assert set(frame.attrs["nito"]) == set(results["key"])
        ended = frame.nito.metrics()  # df.nito works on it: the same figures as the result rows
        by_key = results.set_index("key")
        for key, row in ended.iterrows():
            assert row["n_token_chunks"] == by_key.loc[key, "n_token_chunks"]

        # Resume, as the message says: with space again, the same call ends every request once.
        assert _mount("-o", "remount,size=64m", str(disk)).returncode == 0
        again = nito_nb.run(PROMPTS, store=str(store), **OPTIONS).wait(timeout=120)
        assert again.error is None
        assert len(again.skipped) == len(stored & set(answered["key"]))
        with nito_nb.open_store(store) as opened:
            final = opened.results()
        assert len(final) == len(PROMPTS) and final["key"].is_unique
        assert (final["status"] == "done").all()


def test_a_store_that_a_full_disk_refuses_from_the_start_is_one_line(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "disk", "1m") as disk:
        with contextlib.suppress(OSError), open(disk / "filler", "wb") as f:  # until ENOSPC
            while True:
                f.write(b"\0" * 4096)
                f.flush()
        with pytest.raises(nito_nb.StoreError) as raised:
            nito_nb.run(["a"], model="sim/echo", store=str(disk / "store"), progress=False)
        message = str(raised.value)
        assert message.startswith(
            f"the disk holding the run store {str(disk / 'store')!r} is full"
        ), message
        assert message.endswith("free some space there, or give store= another folder")
        assert raised.value.__suppress_context__  # no DuckDB traceback chained under it
        (disk / "filler").unlink()  # space again: the same call works (no empty database was left)
        run = nito_nb.run(["a"], model="sim/echo", store=str(disk / "store"), progress=False).wait(
            timeout=60
        )
        assert run.error is None and run.results()["status"].tolist() == ["done"]


def test_a_read_only_file_system_is_one_line_and_the_store_still_reads(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "disk", "16m") as disk:
        store = disk / "store"
        nito_nb.run(["a", "b"], model="sim/echo", store=str(store), progress=False).wait(timeout=60)
        _read_only(disk)  # a store opened while its file system refuses writes
        for path in (store, disk / "new", disk / "new" / "deeper"):
            with pytest.raises(nito_nb.StoreError) as raised:
                nito_nb.run(["a", "b"], model="sim/echo", store=str(path), progress=False)
            reads = " (nito_nb.open_store reads this one as it is)" if path == store else ""
            assert str(raised.value) == (
                f"the run store {str(path)!r} cannot be written: its file system is "
                f"read-only; give store= a folder you can write to{reads}"
            )
            assert raised.value.__suppress_context__
        with nito_nb.open_store(store) as opened:  # what it says: reading works
            assert len(opened.results()) == 2 and len(opened.frame())


def test_a_folder_that_refuses_writes_is_one_line(tmp_path: Path) -> None:
    # A folder of the user's that cannot be written: a read-only bind mount of it (root ignores
    # the permission bits that make a folder unwritable for everyone else).
    with _tmpfs(tmp_path / "disk", "16m") as disk:
        folder, view = disk / "folder", tmp_path / "view"
        folder.mkdir()
        view.mkdir()
        assert _mount("--bind", str(folder), str(view)).returncode == 0
        try:
            _read_only(view)
            with pytest.raises(
                nito_nb.StoreError,
                match=r"^the run store .* cannot be written: its file system is "
                r"read-only; give store= a folder you can write to",
            ):
                nito_nb.run(["a"], model="sim/echo", store=str(view), progress=False)
            assert not os.listdir(folder)  # nothing was written there
        finally:
            subprocess.run(["umount", "-l", str(view)], capture_output=True)


def _stored(store: Path) -> Path:
    nito_nb.run(["a", "b"], model="sim/echo", store=str(store), progress=False).wait(timeout=60)
    return store / "runs.duckdb"


def test_a_truncated_or_damaged_database_is_one_line(tmp_path: Path) -> None:
    cut, damaged = tmp_path / "cut", tmp_path / "damaged"
    db = _stored(cut)
    shutil.copytree(cut, damaged)
    with open(db, "r+b") as f:  # a copy that stopped half-way
        f.truncate(db.stat().st_size // 2)
    with open(damaged / "runs.duckdb", "r+b") as f:  # bytes changed in its header block
        f.seek(4096)
        f.write(b"\xab" * 512)
    for store, why in ((cut, "Could not read enough bytes"), (damaged, "Corrupt database file")):
        for opening in (
            lambda path: nito_nb.run(["a"], model="sim/echo", store=str(path), progress=False),
            nito_nb.open_store,
        ):
            with pytest.raises(nito_nb.StoreError) as raised:
                opening(store)
            message = str(raised.value)
            assert message.startswith(
                f"the run store's database {str(store / 'runs.duckdb')!r} cannot be opened ("
            )
            assert why in message and "\n" not in message, message
            assert message.endswith(
                f"it is damaged or cut short: move the folder {str(store)!r} away, or give "
                "store= another folder"
            )
            assert raised.value.__suppress_context__
    garbage = tmp_path / "garbage"  # random bytes where the database was: not DuckDB's at all
    garbage.mkdir()
    (garbage / "runs.duckdb").write_bytes(os.urandom(db.stat().st_size))
    for opening in (
        lambda path: nito_nb.run(["a"], model="sim/echo", store=str(path), progress=False),
        nito_nb.open_store,
    ):
        with pytest.raises(
            nito_nb.ConfigurationError,
            match=r"runs.duckdb' is not a nito_nb run store's database "
            r"\(it is not a DuckDB file\): move it away",
        ):
            opening(garbage)


def test_a_script_that_exits_mid_run_does_not_blame_its_store(tmp_path: Path) -> None:
    # A script that stops a stored run and exits without run.wait(): its writer met DuckDB's
    # "the Python interpreter is shutting down" and the run's line said the store failed and
    # should be mended (two runs in three here). The store is fine: say the exit cut it short.
    import sys

    script = tmp_path / "exits.py"
    script.write_text(
        "import nito_nb, time\n"
        "run = nito_nb.run([f'row {i}' for i in range(500)], model=['sim/echo', 'sim/chat'],\n"
        f"                  store={str(tmp_path / 'runs')!r}, sim={{'tps': 1000, 'ttft_ms': 0}}, progress=False)\n"
        "time.sleep(1.0)\n"
        "run.stop()\n",
        encoding="utf-8",
    )
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            check=False,
        )
        assert "failed (" not in done.stderr and "once that is mended" not in done.stderr, (
            done.stderr
        )
        assert not done.stderr.strip() or "cut short by Python's exit" in done.stderr, done.stderr
