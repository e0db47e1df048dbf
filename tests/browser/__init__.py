"""Real-browser tests (JupyterLab + Debian Chromium). A package, so that this folder's conftest
and helper modules do not shadow tests/conftest.py under pytest's default import mode."""
