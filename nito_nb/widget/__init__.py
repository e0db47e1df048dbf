"""The chat widget and the live view of one Stream, as ipywidgets (``nito_nb.ChatWidget``,
``nito_nb.StreamView``)."""

from .chat import ChatWidget, StreamView

__all__ = ["ChatWidget", "StreamView"]
