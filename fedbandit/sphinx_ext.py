"""Sphinx extension loaded by the book's ``_config.yml`` (``sphinx.extra_extensions``).

It fixes one defect of the Jupyter Book 1 toolchain: sphinx-thebe's configuration
script (``const THEBE_JS_URL = ...``) is registered twice, with the file name once None and once "", so every page throws
"Identifier 'THEBE_JS_URL' has already been declared" in the browser.  Identical
scripts are dropped from each page's script list before it is rendered.
"""

from __future__ import annotations

__all__ = ["setup"]


def _dedupe_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen = set()
    unique = []
    for script in scripts:
        attributes = getattr(script, "attributes", {}) or {}
        key = (str(getattr(script, "filename", script) or ""), tuple(sorted((k, str(v)) for k, v in attributes.items())))
        if key in seen:
            continue
        seen.add(key)
        unique.append(script)
    context["script_files"] = unique


def setup(app):
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
