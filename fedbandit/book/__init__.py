"""What the book needs beyond the science: the scale knob, the figure style, the Sphinx extension."""

import importlib

# --- re-exports (generated from each module's __all__) ---
_EXPORTS = {
    "sync_execution_cache": "execution_cache",
    "book_notebooks": "execution_cache",
    "execute_missing": "execution_cache",
    "Control": "explorer",
    "make_explorer": "explorer",
    "explorer_mode": "explorer",
    "decode_explorer": "explorer",
    "DecodedExplorer": "explorer",
    "use_book_style": "plotting",
    "band": "plotting",
    "log_ticks": "plotting",
    "log_ticks_within": "plotting",
    "to_book_width": "plotting",
    "finish": "plotting",
    "check_figure": "plotting",
    "figure_problems": "plotting",
    "figure_png": "plotting",
    "FigureTextError": "plotting",
    "CONTENT_WIDTH_PX": "plotting",
    "FIGURE_WIDTH_IN": "plotting",
    "SAVED_WIDTH_PX": "plotting",
    "MIN_FONT_PT": "plotting",
    "PROVENANCE_KEY": "plotting",
    "print_pdf": "pdf",
    "pdf_outline_titles": "pdf",
    "glue_number": "prose",
    "glue_text": "prose",
    "typed_results": "prose",
    "SCALES": "scale",
    "CHAPTER_BUDGETS": "scale",
    "BOOK_BUDGET": "scale",
    "BOOK_JOBS": "scale",
    "get_scale": "scale",
    "by_scale": "scale",
    "setup": "sphinx_ext",
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
