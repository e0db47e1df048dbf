"""The store's events helper process (``runs/_events.py``): ``python -m nito_nb.runs._events_main``.

A module of its own so that ``-m`` runs it without a second copy of ``_events`` (the package
imports that one first)."""

import sys

from nito_nb.runs._events import main

if __name__ == "__main__":
    main(sys.argv)
