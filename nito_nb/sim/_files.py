"""The files ``sim/replay`` may read: recordings under the replay directories, and nothing else.

The replay directories are the ones the user named: ``--replay-dir`` (``python -m nito_nb.sim``,
repeatable), else ``NITO_SIM_REPLAY_DIRS`` (paths separated by ``os.pathsep``; the simulators
nito_nb starts read it at each request, as the other ``NITO_SIM_*`` settings), else the
simulator's working directory (a notebook's kernel: the notebook's folder). A relative
``sim.replay`` is taken from the working directory.

How a path is checked, and why so:
- It is resolved first (``os.path.realpath``: every link followed, ``..`` folded) and must then
  lie in one of the directories, themselves resolved (``os.path.commonpath``). So a link inside
  that stays inside works (a recordings folder linked into a project), and a link inside that
  points out (``steal.sse -> /home/me/.ssh/...``) is refused like any path outside.
- The resolved path is then opened one component at a time from its directory, each with
  ``O_NOFOLLOW`` (``os.open(..., dir_fd=...)``): a component swapped for a link between the check
  and the read (by someone who can write in that directory) is refused, not followed. Where the
  system has no ``O_NOFOLLOW`` or ``dir_fd`` (Windows), the resolved path is opened as it is.
- Only regular files ending in ``.sse`` or ``.jsonl`` (the given name and the resolved one) are
  read; a FIFO or a device is refused without blocking.
- A path outside gets one answer whether or not it exists (403, the same words); only a path
  inside is told apart (404: no such file, or not one that can be read).

Blocking I/O: the app calls :func:`read_recording` in a worker thread.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ._reply import ErrorReply, error_reply

__all__ = ["REPLAY_DIRS_VARIABLE", "REPLAY_SUFFIXES", "Recording", "read_recording", "replay_dirs"]

REPLAY_SUFFIXES = (".sse", ".jsonl")
REPLAY_DIRS_VARIABLE = "NITO_SIM_REPLAY_DIRS"
#: Read beside a ``.sse`` recording for its status and content type (``_recordings.recorded_status``).
SOURCES = "SOURCES.tsv"

#: Whether a file can be opened component by component without following links.
_BENEATH = (
    hasattr(os, "O_NOFOLLOW") and hasattr(os, "O_DIRECTORY") and os.open in os.supports_dir_fd
)


@dataclass(frozen=True)
class Recording:
    """A recording read from a replay directory: its file name, bytes and SOURCES.tsv, if any."""

    name: str
    body: bytes
    sources_tsv: str | None


def replay_dirs(named: Sequence[str] | None, env: Mapping[str, str], cwd: str) -> tuple[str, ...]:
    """The replay directories, resolved: ``named`` (``--replay-dir``), else those of
    ``NITO_SIM_REPLAY_DIRS`` in ``env``, else ``cwd``. A relative one is taken from ``cwd``."""
    if not named:
        named = [d for d in env.get(REPLAY_DIRS_VARIABLE, "").split(os.pathsep) if d.strip()] or [
            cwd
        ]
    return tuple(os.path.realpath(os.path.join(cwd, os.path.expanduser(d))) for d in named)


def _outside(given: str) -> ErrorReply:
    return error_reply(
        403,
        f"sim.replay reads only .sse and .jsonl files under the simulator's replay directories "
        f"(--replay-dir, else {REPLAY_DIRS_VARIABLE}, else its working directory), never through a "
        f"link out of them: {given!r} is not one.",
    )


def _missing(given: str) -> ErrorReply:
    return error_reply(404, f"sim.replay: no such file, or not a file that can be read: {given!r}.")


def _home(real: str, dirs: Sequence[str]) -> str | None:
    """The replay directory ``real`` lies in, or None."""
    for folder in dirs:
        try:
            if os.path.commonpath([folder, real]) == folder:
                return folder
        except ValueError:  # another drive (Windows)
            continue
    return None


def _open_beneath(folder: str, real: str) -> int:
    """A descriptor of the regular file ``real`` (a resolved path inside ``folder``), opened
    without following any link on the way; OSError otherwise."""
    if not _BENEATH:
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    else:
        parts = os.path.relpath(real, folder).split(os.sep)
        here = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in parts[:-1]:
                below = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=here)
                os.close(here)
                here = below
            # O_NONBLOCK: a FIFO would otherwise block the open until a writer came.
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=here)
        finally:
            os.close(here)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IsADirectoryError(real)  # a directory, FIFO or device: not a recording
    return fd


def _read(folder: str, real: str) -> bytes:
    with os.fdopen(_open_beneath(folder, real), "rb") as file:
        return file.read()


def read_recording(
    given: str, named: Sequence[str] | None, env: Mapping[str, str]
) -> Recording | ErrorReply:
    """The recording ``sim.replay`` names (``given``), if it is one under the replay directories
    (``named``, else ``env``'s, else the working directory: :func:`replay_dirs`); else the
    refusal to send (see the module's docstring)."""
    if not given.endswith(REPLAY_SUFFIXES):
        return error_reply(400, f"sim.replay must name a .sse or .jsonl file, got {given!r}.")
    try:
        cwd = os.getcwd()  # at each request: a notebook's %cd moves its replay directory along
        dirs = replay_dirs(named, env, cwd)
        real = os.path.realpath(os.path.join(cwd, os.path.expanduser(given)))
    except (OSError, ValueError):  # the working directory is gone, a NUL byte in the path...
        return _outside(given)
    folder = _home(real, dirs)
    if folder is None:
        return _outside(given)
    if not real.endswith(REPLAY_SUFFIXES):  # a link inside to a file inside of another kind
        return error_reply(400, f"sim.replay must name a .sse or .jsonl file, got {given!r}.")
    try:
        body = _read(folder, real)
    except OSError:
        return _missing(given)
    sources_tsv = None
    try:
        sources_tsv = _read(folder, os.path.join(os.path.dirname(real), SOURCES)).decode("utf-8")
    except (OSError, UnicodeDecodeError):  # none beside it (or not one to read): the defaults
        pass
    return Recording(os.path.basename(real), body, sources_tsv)
