"""``%%nito`` and ``%nito``: the IPython magics (``%load_ext nito_nb``).

``magics.py`` holds the ``NitoMagics`` class and its cell flow.
"""

from .magics import Nito, NitoMagics, last, load_ipython_extension

__all__ = ["Nito", "NitoMagics", "last", "load_ipython_extension"]
