"""Sphinx extension loaded by the book's ``_config.yml`` (``sphinx.extra_extensions``).

It does three things for the book:

* ``{reconstruction-list}``: a directive replaced by the list of every
  "Reconstruction" admonition in the book (MyST ``{admonition}`` with
  ``:class: reconstruction``), each with a link to it and its full reason, as rendered
  in the chapter (math, citations and cross-references included).  The list is
  collected from the parsed notebooks at build time, never maintained by hand.
* ``{execution-status}``: a directive replaced by a table of every executed
  notebook: its run time, its time budget at paper scale
  (:data:`fedbandit.book.scale.CHAPTER_BUDGETS`; a paper-scale run over it says so),
  how it was executed (from myst-nb), and the scale it ran at (read from the line
  ``running at scale: quick|paper`` that every chapter prints from
  :func:`fedbandit.book.scale.get_scale`).
* ``FEDBANDIT_NPM_MODULES``: when this environment variable names a ``node_modules``
  folder holding ``mathjax`` (v3), ``requirejs`` and ``@jupyter-widgets/html-manager``
  (``make test`` installs them from the npm registry), the pages load MathJax and the
  widget manager from the book's own ``_static`` instead of a CDN, so math and saved
  widget state render on a machine without internet (the browser check).  Unset
  (``make book``), readers' browsers use the CDNs as usual.
* Three fixes so that pages load without JavaScript errors: a shim for the MathJax 2
  call that ipywidgets still makes (see ``MATHJAX2_HUB_SHIM``); a default colour mode
  for the theme (pydata-sphinx-theme complains when it is empty); and for one defect of
  the Jupyter Book 1 toolchain: sphinx-thebe's
  configuration script (``const THEBE_JS_URL = ...``) is registered twice, with
  the file name once ``None`` and once ``""``, so every page throws "Identifier
  'THEBE_JS_URL' has already been declared" in the browser.  Identical scripts are
  dropped from each page's script list before it is rendered.
* Numbered figures from cell metadata ``{"mystnb": {"figure": {"caption", "name"}}}``:
  myst-nb captions *every* display output of such a cell, so a cell that plots and then
  shows a table or an explorer widget gets two figures with one name (fatal under
  ``-W``); :func:`_figures_wrap_images_only` captions only the cell's first image or
  widget view (an explorer is a numbered figure).
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective

from fedbandit.book.scale import CHAPTER_BUDGETS

__all__ = ["setup"]

SCALE_PATTERN = re.compile(r"running at scale: (quick|paper)")


class reconstruction_list(nodes.General, nodes.Element):
    """Placeholder replaced by the list of reconstructions."""


class execution_status(nodes.General, nodes.Element):
    """Placeholder replaced by the execution-status table."""


class _PlaceholderDirective(SphinxDirective):
    node_class: type = nodes.Element

    def run(self):
        self.env.fedbandit_aggregate_docs = getattr(self.env, "fedbandit_aggregate_docs", set())
        self.env.fedbandit_aggregate_docs.add(self.env.docname)
        return [self.node_class("")]


class ReconstructionListDirective(_PlaceholderDirective):
    node_class = reconstruction_list


class ExecutionStatusDirective(_PlaceholderDirective):
    node_class = execution_status


def _collect(app, doctree):
    """Record the document's reconstruction admonitions (giving each an id) and scale."""
    env = app.env
    docname = env.docname
    found = []
    taken = set(doctree.ids)
    for node in doctree.findall(nodes.admonition):
        if "reconstruction" not in node["classes"]:
            continue
        title_node = node.next_node(nodes.title)
        title = title_node.astext() if title_node else "Reconstruction"
        if not node["ids"]:
            base = "reconstruction-" + (nodes.make_id(title.removeprefix("Reconstruction")) or "item")
            ident, n = base, 1
            while ident in taken:
                n += 1
                ident = f"{base}-{n}"
            node["ids"].append(ident)
            doctree.ids[ident] = node
            taken.add(ident)
        # the whole body (math, citations, lists, links), copied without its ids
        body = [_detached(child) for child in node.children if child is not title_node]
        found.append({"id": node["ids"][0], "title": title, "body": body})
    recon = env.__dict__.setdefault("fedbandit_reconstructions", {})
    recon[docname] = found
    if any(doctree.findall(reconstruction_list)):
        # the reasons copied into this page at write time carry math: load MathJax here
        env.get_domain("math").data["has_equations"][docname] = True
    scale = None
    for block in doctree.findall(nodes.literal_block):
        match = SCALE_PATTERN.search(block.astext())
        if match:
            scale = match.group(1)
            break
    env.__dict__.setdefault("fedbandit_scales", {})[docname] = scale


def _detached(node: nodes.Node) -> nodes.Node:
    """A deep copy of ``node`` with no ids or names (they stay unique to the original)."""
    copy = node.deepcopy()
    for element in copy.findall(nodes.Element):
        element["ids"] = []
        element["names"] = []
    return copy


def _purge(app, env, docname):
    for attr in ("fedbandit_reconstructions", "fedbandit_scales"):
        getattr(env, attr, {}).pop(docname, None)
    getattr(env, "fedbandit_aggregate_docs", set()).discard(docname)


def _merge(app, env, docnames, other):
    for attr in ("fedbandit_reconstructions", "fedbandit_scales"):
        mine = env.__dict__.setdefault(attr, {})
        for docname in docnames:
            if docname in getattr(other, attr, {}):
                mine[docname] = getattr(other, attr)[docname]
    env.__dict__.setdefault("fedbandit_aggregate_docs", set()).update(
        getattr(other, "fedbandit_aggregate_docs", set())
    )


def _outdated(app, env):
    """Pages with an aggregate directive depend on every other page: rewrite them always."""
    return sorted(getattr(env, "fedbandit_aggregate_docs", set()) & set(env.found_docs))


def _doc_link(fromdoc: str, docname: str, anchor: str | None, text: str) -> nodes.Node:
    if anchor is None:
        ref = pending_xref(
            "",
            refdoc=fromdoc,
            reftarget="/" + docname,
            reftype="doc",
            refdomain="std",
            refexplicit=True,
            refwarn=True,
        )
        ref += nodes.inline(text=text)
        return ref
    return nodes.reference(text, text, internal=True, refuri=_relative_uri(fromdoc, docname) + "#" + anchor)


def _relative_uri(fromdoc: str, todoc: str) -> str:
    return posixpath.relpath(todoc, posixpath.dirname(fromdoc) or ".") + ".html"


def _title(env, docname: str) -> str:
    title = env.titles.get(docname)
    return title.astext() if title is not None else docname


def _ordered_docs(env) -> list[str]:
    """Documents in table-of-contents order (falling back to name order)."""
    order = []
    root = env.config.root_doc

    def walk(doc):
        if doc in order:
            return
        order.append(doc)
        for child in env.toctree_includes.get(doc, []):
            walk(child)

    walk(root)
    return order + sorted(set(env.found_docs) - set(order))


class _AggregatesTransform(SphinxPostTransform):
    default_priority = 8  # before the reference resolvers, so pending_xref nodes resolve

    def run(self, **kwargs):
        env = self.env
        for node in list(self.document.findall(reconstruction_list)):
            node.replace_self(self._reconstructions(env))
        for node in list(self.document.findall(execution_status)):
            node.replace_self(self._status(env))

    def _reconstructions(self, env):
        recon = getattr(env, "fedbandit_reconstructions", {})
        out = []
        total = 0
        for docname in _ordered_docs(env):
            items = recon.get(docname) or []
            if not items:
                continue
            section_title = nodes.paragraph()
            section_title += nodes.strong(text=_title(env, docname))
            section_title += nodes.Text(f" ({len(items)})")
            out.append(section_title)
            bullets = nodes.bullet_list()
            for item in items:
                head = nodes.paragraph()
                head += nodes.strong("", "", _doc_link(env.docname, docname, item["id"], item["title"]))
                entry = nodes.list_item("", head)
                for child in item["body"]:
                    child = child.deepcopy()
                    # references in the reason resolve as if written on this page
                    for xref in child.findall(pending_xref):
                        xref["refdoc"] = env.docname
                    entry += child
                bullets += entry
                total += 1
            out.append(bullets)
        summary = nodes.paragraph(text=f"{total} reconstructions in the book, collected from the chapters at build time.")
        return [summary] + out

    def _status(self, env):
        from myst_nb.sphinx_ import NbMetadataCollector  # myst-nb exists only in the book's build

        metadata = NbMetadataCollector.get_doc_data(env)
        scales = getattr(env, "fedbandit_scales", {})

        headers = ["Chapter", "Scale", "Run time (s)", "Budget at paper scale (s)", "Executed", "Method", "Status"]
        table = nodes.table(classes=["colwidths-auto"])
        tgroup = nodes.tgroup(cols=len(headers))
        table += tgroup
        for _ in headers:
            tgroup += nodes.colspec(colwidth=1)
        thead = nodes.thead()
        tgroup += thead
        row = nodes.row()
        for h in headers:
            row += nodes.entry("", nodes.paragraph(text=h))
        thead += row
        tbody = nodes.tbody()
        tgroup += tbody
        for docname in _ordered_docs(env):
            data = (metadata.get(docname) or {}).get("exec_data")
            if not data:
                continue
            runtime = data.get("runtime")
            mtime = data.get("mtime")
            budget = CHAPTER_BUDGETS.get(docname)
            verdict = "succeeded" if data.get("succeeded") else "FAILED"
            if verdict == "succeeded" and scales.get(docname) == "paper" and budget and runtime and runtime > budget:
                verdict = "succeeded, over budget"
            cells = [
                _doc_link(env.docname, docname, None, _title(env, docname)),
                nodes.Text(scales.get(docname) or "not reported"),
                nodes.Text("-" if runtime is None else f"{runtime:.1f}"),
                nodes.Text("-" if budget is None else f"{budget}"),
                nodes.Text(datetime.fromtimestamp(mtime).strftime("%Y-%m-%d %H:%M") if mtime else "-"),
                nodes.Text(str(data.get("method", "-"))),
                nodes.Text(verdict),
            ]
            row = nodes.row()
            for cell in cells:
                para = nodes.paragraph()
                para += cell
                row += nodes.entry("", para)
            tbody += row
        return [table]


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


def _local_web_assets(app, config):
    modules = os.environ.get("FEDBANDIT_NPM_MODULES")
    if not modules:
        return
    modules = Path(modules).resolve()
    sources = {
        "mathjax": modules / "mathjax" / "es5",
        "require.js": modules / "requirejs" / "require.js",
        "html-manager": modules / "@jupyter-widgets" / "html-manager" / "dist",
    }
    missing = [str(p) for p in sources.values() if not p.exists()]
    if missing:
        raise ValueError(f"FEDBANDIT_NPM_MODULES={str(modules)!r} lacks {missing} (see the Makefile's web-assets target)")
    assets = Path(app.doctreedir).parent / "web-assets"
    static = assets / "static"
    shutil.rmtree(assets, ignore_errors=True)
    shutil.copytree(sources["mathjax"], static / "mathjax")
    shutil.copytree(sources["html-manager"], static / "widgets")
    shutil.copy2(sources["require.js"], static / "widgets" / "require.js")
    # The widget bundle asks for its icon fonts relative to the *page*, under
    # @jupyter-widgets/html-manager/dist/; every page with widgets is in chapters/.
    fonts = assets / "extra" / "chapters" / "@jupyter-widgets" / "html-manager" / "dist"
    fonts.mkdir(parents=True)
    for font in sources["html-manager"].iterdir():
        if font.suffix in {".woff", ".woff2", ".ttf", ".eot", ".svg"}:
            shutil.copy2(font, fonts / font.name)
    config.html_static_path = list(config.html_static_path) + [str(static)]
    config.html_extra_path = list(config.html_extra_path) + [str(assets / "extra")]
    config.mathjax_path = "mathjax/tex-mml-chtml.js"
    config.nb_ipywidgets_js = {
        "widgets/require.js": {},
        "widgets/embed-amd.js": {"data-jupyter-widgets-cdn": "https://cdn.jsdelivr.net/npm/"},
    }


# ipywidgets' controls typeset their labels with the MathJax 2 API
# (``MathJax.Hub.Queue(["Typeset", MathJax.Hub, element])``, jupyter-widgets/ipywidgets#3829),
# which MathJax 3 removed: on a page with both math and widgets every widget threw
# "Cannot read properties of undefined (reading 'Queue')".  This shim maps that call to
# MathJax 3's typesetPromise, both before MathJax has loaded (on its configuration object)
# and after (MathJax 3 replaces the global object, so startup.ready puts it back).
MATHJAX2_HUB_SHIM = """
(function () {
  if (!window.MathJax || window.MathJax.Hub) { return; }
  function typeset(element) {
    var mj = window.MathJax;
    var run = function () { return mj.typesetPromise ? mj.typesetPromise([element]).catch(function () {}) : null; };
    if (mj.startup && mj.startup.promise) { mj.startup.promise.then(run); } else { run(); }
  }
  var hub = { Queue: function () {
    for (var i = 0; i < arguments.length; i++) {
      var job = arguments[i];
      if (Array.isArray(job) && job[0] === "Typeset" && job[2]) { typeset(job[2]); }
    }
  } };
  window.MathJax.Hub = hub;
  var startup = window.MathJax.startup = window.MathJax.startup || {};
  var ready = startup.ready;
  startup.ready = function () {
    if (ready) { ready(); } else { window.MathJax.startup.defaultReady(); }
    window.MathJax.Hub = hub;
  };
})();
"""


def _theme_mode(app, config):
    # pydata-sphinx-theme logs a console error on every page when no default mode is set
    context = dict(config.html_context or {})
    context.setdefault("default_mode", "auto")
    config.html_context = context


def _is_figure_mime(mime_type: str) -> bool:
    # an image, or a widget view (an explorer: a figure whose image the reader switches)
    return mime_type.startswith("image/") or mime_type == "application/vnd.jupyter.widget-view+json"


def _figures_wrap_images_only() -> None:
    """Make ``mystnb.figure`` cell metadata caption only the cell's first image (or widget) output.

    myst-nb (1.x) wraps every display output of a cell that has ``mystnb.figure``
    metadata in a figure with that caption and name, so a cell that draws a plot and
    then displays a table or returns a widget gets two figures with one name
    ("Duplicate explicit target name", fatal under ``-W``) and a captioned table.  Here the
    first image output of the cell, or its first widget view (an explorer, see
    :mod:`fedbandit.book.explorer`), gets the numbered figure and every other output is
    rendered as usual.  With another myst-nb (no
    ``myst_nb.sphinx_.create_figure_context``) nothing is changed.
    """
    try:
        import myst_nb.sphinx_ as nb_sphinx

        original = nb_sphinx.create_figure_context
    except (ImportError, AttributeError):
        return
    if getattr(original, "fedbandit_images_only", False):
        return  # already installed (the extension is set up once per process)

    @contextmanager
    def figure_context(renderer, figure_options, line):
        if not isinstance(figure_options, dict):
            with original(renderer, figure_options, line):
                yield
            return
        # render the output into a detached holder, then decide whether it is the figure
        holder = nodes.Element()
        with renderer.current_node_context(holder):
            yield
        is_image = any(
            _is_figure_mime(str(node.get("mime_type", ""))) for node in holder.findall(nodes.container)
        )
        # all outputs of one cell are rendered with the cell's line number
        captioned = renderer.__dict__.setdefault("fedbandit_captioned_cells", set())
        if is_image and line not in captioned:
            captioned.add(line)
            with original(renderer, figure_options, line):
                renderer.current_node.extend(list(holder.children))
        else:
            renderer.current_node.extend(list(holder.children))

    figure_context.fedbandit_images_only = True
    nb_sphinx.create_figure_context = figure_context


def _static_build_environment(app, config):
    """Tell the notebooks this build executes that no kernel will run behind the pages.

    Set before any notebook is executed, so every kernel the build starts inherits them:
    ``FEDBANDIT_EXPLORER=static`` makes :func:`fedbandit.book.explorer.make_explorer`
    precompute its outputs, and ``TQDM_DISABLE=1`` keeps progress bars (widgets in a
    notebook, frozen mid-way in a page) out of the pages.  A value already set wins.
    """
    os.environ.setdefault("FEDBANDIT_EXPLORER", "static")
    os.environ.setdefault("TQDM_DISABLE", "1")


def setup(app):
    _figures_wrap_images_only()
    app.connect("config-inited", _static_build_environment)
    app.connect("config-inited", _theme_mode)
    app.add_js_file(None, body=MATHJAX2_HUB_SHIM, priority=510)
    app.connect("config-inited", _local_web_assets)
    app.add_node(reconstruction_list)
    app.add_node(execution_status)
    app.add_directive("reconstruction-list", ReconstructionListDirective)
    app.add_directive("execution-status", ExecutionStatusDirective)
    app.add_post_transform(_AggregatesTransform)
    app.connect("doctree-read", _collect)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-get-updated", _outdated)
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 3}
