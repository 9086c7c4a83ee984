"""What the book needs beyond the science: the scale knob, the figure style, the Sphinx extension.

The top level (``__all__``) exports what a user calls; every other public name is imported
from its module, e.g. ``from fedbandit.book.scale import CHAPTER_BUDGETS`` (ARCHITECTURE.md, *Public API*).
"""

import importlib

# --- the top level: what a user calls (ARCHITECTURE.md, "Public API"); every other public name
# is imported from its module (each module's __all__) ---
_EXPORTS = {
    "Control": "explorer",
    "make_explorer": "explorer",
    "use_book_style": "plotting",
    "band": "plotting",
    "log_ticks": "plotting",
    "finish": "plotting",
    "glue_number": "prose",
    "glue_text": "prose",
    "get_scale": "scale",
    "by_scale": "scale",
}

__all__ = list(_EXPORTS)


def __getattr__(name):
    # Public names are imported from their module on first use (PEP 562), so importing a
    # subpackage stays cheap and subpackages can import each other's modules freely.
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
# --- end of re-exports ---
