"""The chat widget and the live view of one Stream, as ipywidgets (``nito_nb.ChatWidget``,
``nito_nb.StreamView``).

One concern per module: ``view.py`` (``StreamView``: one Stream, live), ``prompt_box.py`` (the
input box's front end), ``chat.py`` (``ChatWidget``: turns on background loops, picker, Stop).
"""

from .chat import ChatWidget
from .view import StreamView

__all__ = ["ChatWidget", "StreamView"]
