"""``%%nito`` and ``%nito``: the IPython magics (``%load_ext nito_nb``).

One concern per module: ``magics.py`` (the ``NitoMagics`` class: the session, what a cell's
routes share), ``options.py`` (the options, their checks and request fields), ``cell.py`` (a
cell's flow, one model streamed live), ``commands.py`` (``%nito help | config | models | history |
cost | last | reset``), ``over.py`` (``--over``, ``--score``), ``config.py`` (the ``Nito``
configurable and its checks), ``grid.py`` (several models side by side), ``replay.py``
(``--replay``), ``history.py`` (``%nito history`` / ``cost``, the comparison table), ``store.py``
(``Nito.store``: the streams written to a run store and read back), ``output.py`` (one-line
errors, starting a live view).
"""

from .config import Nito
from .magics import NitoMagics, last, load_ipython_extension

__all__ = ["Nito", "NitoMagics", "last", "load_ipython_extension"]
