"""A worker process of ``engine="processes"`` (``runs/_processes.py``): ``python -m
nito_nb.runs._worker_main FD``.

A module of its own so that ``-m`` runs it without a second copy of ``_processes`` (the package
imports that one first)."""

import sys

from nito_nb.runs._processes import main

if __name__ == "__main__":
    main(sys.argv)
