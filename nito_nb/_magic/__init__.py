"""``%%nito`` and ``%nito``: the IPython magics (``%load_ext nito_nb``).

One concern per module: ``magics.py`` (the ``NitoMagics`` class, the line commands and the cell
flow), ``config.py`` (the ``Nito`` configurable and its checks), ``grid.py`` (several models side
by side), ``replay.py`` (``--replay``), ``history.py`` (``%nito history`` / ``cost``, the comparison
table), ``store.py`` (``Nito.store``: the streams written to a run store and read back),
``output.py`` (one-line errors, starting a live view).
"""

from .config import Nito
from .magics import NitoMagics, last, load_ipython_extension

__all__ = ["Nito", "NitoMagics", "last", "load_ipython_extension"]
