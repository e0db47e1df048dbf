"""The chat's input box, a small anywidget: Enter sends, and the notebook's own shortcuts
(Shift+Enter runs the cell) stay out of it."""

from __future__ import annotations

import anywidget
import traitlets

__all__ = ["PromptBox"]


# The prompt box's front end. Measured in the browser: Notebook 7 reads keys before the page's
# widgets do, so Shift+Enter in ipywidgets' Text re-ran the cell (a new, empty chat replaced this
# one), and ipywidgets' Textarea has no key event at all (multi-line prompts could only be sent with
# the button). This box marks itself with Lumino's `data-lm-suppress-shortcuts`, the attribute
# JupyterLab and Notebook 7 check before running a shortcut, and sends Enter itself. The value is
# only ever assigned as text (`.value`, `.placeholder`): nothing here parses markup.
_PROMPT_BOX_ESM = """
function render({ model, el }) {
  el.setAttribute("data-lm-suppress-shortcuts", "true");
  const multiline = model.get("multiline");
  const box = document.createElement(multiline ? "textarea" : "input");
  if (multiline) box.rows = model.get("rows");
  box.className = "nito-prompt-box";
  box.placeholder = model.get("placeholder");
  box.value = model.get("value");
  const save = () => {
    model.set("value", box.value);
    model.save_changes();
  };
  box.addEventListener("input", save);
  box.addEventListener("keydown", (event) => {
    event.stopPropagation();  // the notebook's own key handlers never see what is typed here
    const sends = event.key === "Enter" && (event.shiftKey || !multiline);
    if (!sends || event.isComposing) return;
    event.preventDefault();
    save();
    // The text travels in the message itself: ipywidgets holds back a value update while the
    // previous one is unanswered, so with a far-away kernel `value` can lag the last keystroke.
    model.send({ event: "submit", text: box.value });
  });
  const show = () => {
    if (box.value !== model.get("value")) box.value = model.get("value");
  };
  const hint = () => {
    box.placeholder = model.get("placeholder");
  };
  model.on("change:value", show);
  model.on("change:placeholder", hint);
  el.appendChild(box);
  return () => {  // the view is removed: stop listening
    model.off("change:value", show);
    model.off("change:placeholder", hint);
  };
}
export default { render };
"""

_PROMPT_BOX_CSS = """
.nito-prompt-box {
  box-sizing: border-box; width: 100%; font: inherit; padding: 4px 8px; resize: vertical;
  margin: var(--jp-widgets-margin, 2px) 0; min-height: var(--jp-widgets-inline-height, 28px);
  color: var(--jp-widgets-input-color, var(--jp-ui-font-color1, inherit));
  background: var(--jp-widgets-input-background-color, var(--jp-layout-color1, transparent));
  border: var(--jp-widgets-input-border-width, 1px) solid
    var(--jp-widgets-input-border-color, var(--jp-border-color1, #bdbdbd));
}
.nito-prompt-box:focus {
  outline: none;
  border-color: var(--jp-widgets-input-focus-border-color, var(--jp-brand-color2, #64b5f6));
}
"""


class PromptBox(anywidget.AnyWidget):
    """The chat's input box: Enter sends (``multiline=True``: Enter makes a new line and
    Shift+Enter sends), in JupyterLab and in Notebook 7 alike.

    Sending arrives as the custom message ``{"event": "submit", "text": ...}`` (``on_msg``), with
    the box's text as it was when the key was pressed.
    """

    _esm = _PROMPT_BOX_ESM
    _css = _PROMPT_BOX_CSS
    value = traitlets.Unicode("").tag(sync=True)
    placeholder = traitlets.Unicode("").tag(sync=True)
    multiline = traitlets.Bool(False).tag(sync=True)
    rows = traitlets.Int(3).tag(sync=True)
