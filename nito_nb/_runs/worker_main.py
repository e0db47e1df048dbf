"""A worker process of ``engine="processes"`` (``_runs/processes.py``): ``python -m
nito_nb._runs.worker_main FD``.

A module of its own so that ``-m`` runs it without a second copy of ``_processes`` (the package
imports that one first)."""

import sys

from nito_nb._runs.processes import main

if __name__ == "__main__":
    main(sys.argv)
