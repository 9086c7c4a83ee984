"""Sphinx extension loaded by the book's ``_config.yml`` (``sphinx.extra_extensions``).

What it does for the book:

* ``{reconstruction-list}``: a directive replaced by the list of every
  "Reconstruction" admonition in the book (MyST ``{admonition}`` with
  ``:class: reconstruction``), each with a link to it and its full reason, as rendered
  in the chapter (math, citations and cross-references included).  The list is
  collected from the parsed notebooks at build time, never maintained by hand.
* ``{execution-status}``: a directive replaced by a table of every executed
  notebook: its run time, when it was executed, whether it was executed *in this build*
  or taken from the execution cache (executed after the build started, :func:`build_started`:
  the stamp :func:`fedbandit.book.execution_cache.sync_execution_cache` writes at the start
  of ``make book``, or the end of the previous build; myst-nb's own "method" says "cache"
  for both), and the scale it ran at (the line ``running at scale: quick|paper`` that every
  chapter prints from :func:`fedbandit.book.scale.get_scale`, read from the executed
  notebook or its copy in the execution cache, so a chapter may hide that output with the
  tag ``remove-output``).  The time budgets
  (:data:`fedbandit.book.scale.CHAPTER_BUDGETS`, run time, and
  :data:`fedbandit.book.scale.CHAPTER_CPU_BUDGETS`, CPU time) are for CI, not for readers:
  they are not on the page; at the end of the build each chapter's times against its budgets
  are written to ``execution-report.json`` next to the HTML folder and each overrun is logged.
* Figure numbers per chapter: Sphinx numbers figures across the whole book unless the table
  of contents is section-numbered; :func:`_number_figures_per_document` numbers them per
  chapter, across the chapter's pages in table-of-contents order, prefixed by the chapter's
  number (``01_dp20_gaps`` is chapter 1: "Fig. 1.3"); pages without a number (introduction,
  performance) count "Fig. 1, 2, ...".
* ``{glue:md}`other.ipynb::key```: myst-nb's markdown paste also from another page (a chapter's
  Findings box quotes verdicts computed on the chapter's later pages), resolved after every page
  is read by :class:`_PasteMarkdownAcrossPages`.
* Author-year labels in the bibliography: the pybtex style ``fedbandit_author_year`` labels
  every entry "Dubey and Pentland, 2020" (``bibtex_default_style`` in ``_config.yml``), as
  the in-text citations (``bibtex_reference_style: author_year``) do.
* The book's CSS (:data:`BOOK_CSS`): explorers wrap their controls, show whole readouts and
  scale their images to narrow screens.
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

import json
import os
import posixpath
import re
import shutil
import time
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective

from fedbandit.book.execution_cache import BOOK_BUILD_ENVIRONMENT
from fedbandit.book.execution_cache import STAMP as EXECUTION_STAMP
from fedbandit.book.scale import CHAPTER_BUDGETS, CHAPTER_CPU_BUDGETS, get_scale

__all__ = ["setup"]

SCALE_PATTERN = re.compile(r"running at scale: (quick|paper)")
#: The provenance labels a Reconstruction box may give its choices ("*[paper]*": the paper's text says
#: so; "*[authors' code]*": the authors' released code does; "*[derived]*": the book derives it, with a
#: numerical check).  A box without one is the book's own choice, its reason given in the box.
PROVENANCE_LABELS = ("paper", "authors' code", "derived")
PROVENANCE_PATTERN = re.compile(r"\[(" + "|".join(re.escape(label) for label in PROVENANCE_LABELS) + r")\]")


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
        provenance = list(dict.fromkeys(m.group(1) for m in PROVENANCE_PATTERN.finditer(node.astext())))
        found.append({"id": node["ids"][0], "title": title, "body": body, "provenance": provenance})
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


def _doc_link(fromdoc: str, docname: str, anchor: str | None, text: str, single_page: bool = False) -> nodes.Node:
    """A link to ``docname`` (or to the element ``anchor`` in it); ``single_page``: every document is on one page."""
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
    uri = "#" + anchor if single_page else _relative_uri(fromdoc, docname) + "#" + anchor
    return nodes.reference(text, text, internal=True, refuri=uri)


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
        counts = []
        for docname in _ordered_docs(env):
            items = recon.get(docname) or []
            if not items:
                continue
            counts.append((docname, len(items), [sum(label in item.get("provenance", []) for item in items)
                                                 for label in PROVENANCE_LABELS]))
            section_title = nodes.paragraph()
            section_title += nodes.strong(text=_title(env, docname))
            section_title += nodes.Text(f" ({len(items)})")
            out.append(section_title)
            bullets = nodes.bullet_list()
            for item in items:
                head = nodes.paragraph()
                single_page = getattr(self.app.builder, "name", "") == "singlehtml"
                head += nodes.strong("", "", _doc_link(env.docname, docname, item["id"], item["title"], single_page))
                entry = nodes.list_item("", head)
                for child in item["body"]:
                    child = child.deepcopy()
                    # references in the reason resolve as if written on this page
                    for xref in child.findall(pending_xref):
                        xref["refdoc"] = env.docname
                    entry += child
                labels = item.get("provenance") or []
                entry += nodes.paragraph(text="Provenance: " + (", ".join(labels) if labels else "the book's own choice (its reason is above)"),
                                         classes=["reconstruction-provenance"])
                bullets += entry
                total += 1
            out.append(bullets)
        summary = nodes.paragraph(text=f"{total} reconstructions in the book, collected from the chapters at build time.")
        return [summary, self._provenance_table(env, counts)] + out

    def _provenance_table(self, env, counts):
        """Per chapter: its reconstructions, and how many of them use each provenance label."""
        headers = ["Chapter", "Reconstructions", *PROVENANCE_LABELS]
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
        for docname, n, by_label in counts:
            row = nodes.row()
            cells = [_doc_link(env.docname, docname, None, _title(env, docname)), nodes.Text(str(n)),
                     *(nodes.Text(str(k)) for k in by_label)]
            for cell in cells:
                para = nodes.paragraph()
                para += cell
                row += nodes.entry("", para)
            tbody += row
        return table

    def _status(self, env):
        rows = execution_rows(env)
        headers = ["Chapter", "Scale", "Run time / CPU time (s)", "Load average (start → end)", "Executed",
                   "In this build", "Status"]
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
        for item in rows:
            cells = [
                _doc_link(env.docname, item["docname"], None, _title(env, item["docname"])),
                nodes.Text(item["scale"] or "not reported"),
                nodes.Text(("-" if item["runtime"] is None else f"{item['runtime']:.1f}") + " / "
                           + _cpu_text(item["cpu_seconds"])),
                nodes.Text(_load_text(item["load_average"])),
                nodes.Text(item["executed_at"] or "-"),
                nodes.Text("executed in this build" if item["this_build"] else "from the execution cache"),
                nodes.Text("succeeded" if item["succeeded"] else "FAILED"),
            ]
            row = nodes.row()
            for cell in cells:
                para = nodes.paragraph()
                para += cell
                row += nodes.entry("", para)
            tbody += row
        executed = sum(item["this_build"] for item in rows)
        summary = nodes.paragraph(text=(
            f"{executed} of {len(rows)} notebooks were executed in this build; "
            f"{len(rows) - executed} were taken from the execution cache (executed by an earlier build "
            "from the same code and the same package source)."))
        return [summary, nodes.paragraph(text=_machines_text(rows)), table]


def _cpu_text(cpu: float | None) -> str:
    if cpu is None:
        return "not recorded"
    return "unknown" if cpu != cpu else f"{cpu:.1f}"  # cpu != cpu: NaN (no getrusage)


def _load_text(load: list[float] | None) -> str:
    if load is None:
        return "not recorded"
    return " → ".join("unknown" if v != v else f"{v:.2f}" for v in load)  # v != v: NaN


def _machines_text(rows: list[dict]) -> str:
    """Which machines executed the notebooks, in words (for the status page)."""
    counts: dict[str, int] = {}
    for item in rows:
        if item["machine"] is not None:
            counts[item["machine"]] = counts.get(item["machine"], 0) + 1
    unrecorded = sum(item["machine"] is None for item in rows)
    if not counts:
        return "The machine that executed the notebooks was not recorded."
    if len(counts) == 1 and not unrecorded:
        text = f"Every notebook was executed on one machine: {next(iter(counts))}."
    else:
        text = "The notebooks were executed on: " + "; ".join(f"{m} ({n})" for m, n in counts.items())
        text += f"; not recorded for {unrecorded}." if unrecorded else "."
    return text + (" The load average counts the processes running or waiting to run on the whole machine, the "
                   "build's own included: make book executes two notebooks at a time, and some pages start worker "
                   "processes.")


def build_started(env) -> float:
    """When this build started (seconds since the epoch).

    The latest of the stamp that ``python -m fedbandit.book.execution_cache`` writes next to
    the execution cache at the start of ``make book`` (and of the quick build), and of the mark
    the previous build left when it finished (:data:`BUILD_FINISHED_MARK`), among those older
    than Sphinx's start; else the moment Sphinx started.  Notebooks executed after it were
    executed in this build (a ``jupyter-book build`` run by hand, without the stamp's step, is
    not credited with the executions of an earlier build).
    """
    started = getattr(env, "fedbandit_build_started", None) or time.time()
    cache = getattr(getattr(env, "mystnb_config", None), "execution_cache_path", None)
    marks = []
    if cache:
        for name in (EXECUTION_STAMP, BUILD_FINISHED_MARK):
            mark = Path(cache).parent / name
            if mark.is_file() and mark.stat().st_mtime <= started:
                marks.append(mark.stat().st_mtime)
    return max(marks) if marks else started


#: Touched next to the execution cache when a build finishes without error.
BUILD_FINISHED_MARK = ".fedbandit-build-finished"


def _cache_record(env, docname: str, mtime: float | None = None):
    """The execution cache's record of a page (the one executed at ``mtime``, else the latest), or None.

    Returns ``(cache, record)``: the cache to open the record's bundle from, and the record,
    whose ``data`` is what :func:`fedbandit.book.execution_cache.execute_missing` stored.
    """
    config = getattr(env, "mystnb_config", None)
    cache_path = getattr(config, "execution_cache_path", None)
    if not cache_path or not Path(cache_path).is_dir():
        return None
    try:
        from jupyter_cache import get_cache  # jupyter-cache comes with myst-nb

        cache = get_cache(str(cache_path))
        source = str(Path(env.doc2path(docname)).resolve())
        records = [r for r in cache.list_cache_records() if str(Path(r.uri).resolve()) == source]
    except Exception:  # pragma: no cover - a cache it cannot read says nothing about the page
        return None
    if not records:
        return None
    when = mtime if mtime is not None else max(r.created.timestamp() for r in records)
    return cache, min(records, key=lambda r: abs(r.created.timestamp() - when))


def _executed_scale(env, docname: str, mtime: float | None = None) -> str | None:
    """The scale a notebook ran at: the line ``running at scale: ...`` in its outputs.

    Read from the executed notebook myst-nb wrote, else from the execution cache's copy (which
    keeps the outputs of cells tagged ``remove-output``; the record executed at ``mtime``),
    else from the page.
    """
    config = getattr(env, "mystnb_config", None)
    folder = getattr(config, "output_folder", None)
    if folder:
        executed = Path(folder) / f"{docname}.ipynb"
        if executed.is_file():
            match = SCALE_PATTERN.search(executed.read_text(encoding="utf-8", errors="replace"))
            if match:
                return match.group(1)
    found = _cache_record(env, docname, mtime)
    if found is not None:
        cache, record = found
        try:
            nb = cache.get_cache_bundle(record.pk).nb
        except Exception:  # pragma: no cover - a cache it cannot read says nothing about the scale
            nb = None
        for cell in nb.cells if nb is not None else ():
            for output in cell.get("outputs", []):
                match = SCALE_PATTERN.search(str(output.get("text", "")))
                if match:
                    return match.group(1)
    return getattr(env, "fedbandit_scales", {}).get(docname)


def _recorded_execution(env, docname: str, mtime: float | None) -> dict:
    """What :func:`fedbandit.book.execution_cache.execute_missing` stored with a page's execution:
    ``machine`` (str), ``load_average`` (the 1-minute load at its start and end) and ``cpu_seconds``,
    each None when the record lacks it (a page executed by jupyter-book itself)."""
    found = _cache_record(env, docname, mtime)
    data = (found[1].data or {}) if found is not None else {}
    machine, load, cpu = data.get("machine"), data.get("load_average"), data.get("cpu_seconds")
    if not isinstance(machine, str):
        machine = None
    if not (isinstance(load, list) and len(load) == 2 and all(isinstance(v, (int, float)) for v in load)):
        load = None
    if not isinstance(cpu, (int, float)) or isinstance(cpu, bool):
        cpu = None
    return {"machine": machine, "load_average": load, "cpu_seconds": cpu}


def execution_rows(env) -> list[dict]:
    """One record per executed notebook of the book, in table-of-contents order.

    Keys: ``docname``, ``scale`` (``"quick"``, ``"paper"`` or None), ``runtime`` (seconds,
    or None), ``executed_at`` (``"YYYY-MM-DD HH:MM"`` or None), ``this_build`` (executed
    after :func:`build_started`), ``succeeded``, ``cpu_seconds`` (the CPU time of its kernel and
    of the worker processes the kernel started, or None), ``machine`` (the machine that executed
    it, or None), ``load_average`` (the 1-minute load average at the start and at the end of its
    execution, or None), ``budget`` (seconds at paper scale, from
    :data:`fedbandit.book.scale.CHAPTER_BUDGETS`, or None), ``over_budget`` (a paper-scale
    run executed in this build that took longer than its budget), ``cpu_budget`` (CPU-seconds at
    paper scale, from :data:`fedbandit.book.scale.CHAPTER_CPU_BUDGETS`, or None) and
    ``over_cpu_budget`` (such a run whose CPU time exceeded it): :func:`_against_budgets`.
    """
    from myst_nb.sphinx_ import NbMetadataCollector  # myst-nb exists only in the book's build

    metadata = NbMetadataCollector.get_doc_data(env)
    started = build_started(env)
    rows = []
    for docname in _ordered_docs(env):
        data = (metadata.get(docname) or {}).get("exec_data")
        if not data:
            continue
        runtime, mtime = data.get("runtime"), data.get("mtime")
        scale = _executed_scale(env, docname, mtime)
        this_build = bool(mtime and mtime >= started - 1.0)
        if scale is None and this_build:
            scale = get_scale()  # the notebook's kernel inherited this build's FEDBANDIT_SCALE
        recorded = _recorded_execution(env, docname, mtime)
        rows.append({
            "docname": docname,
            "scale": scale,
            "runtime": runtime,
            "executed_at": datetime.fromtimestamp(mtime).strftime("%Y-%m-%d %H:%M") if mtime else None,
            "this_build": this_build,
            "succeeded": bool(data.get("succeeded")),
            "cpu_seconds": recorded["cpu_seconds"],
            "machine": recorded["machine"],
            "load_average": recorded["load_average"],
            **_against_budgets(docname, scale=scale, this_build=this_build, runtime=runtime,
                              cpu_seconds=recorded["cpu_seconds"]),
        })
    return rows


def _against_budgets(docname: str, *, scale, this_build: bool, runtime, cpu_seconds) -> dict:
    """A notebook's run time and CPU time against its budgets.

    Only a paper-scale execution of this build is compared (a quick build's pages, or times
    taken from the execution cache, are not this build's measurements of the paper scale).

    Returns
    -------
    dict
        ``budget`` and ``cpu_budget`` (:data:`~fedbandit.book.scale.CHAPTER_BUDGETS` and
        :data:`~fedbandit.book.scale.CHAPTER_CPU_BUDGETS`, None for a page without one);
        ``over_budget`` and ``over_cpu_budget``: whether the run time, or the CPU time (the
        kernel's and its worker processes'), exceeded its budget.
    """
    budget, cpu_budget = CHAPTER_BUDGETS.get(docname), CHAPTER_CPU_BUDGETS.get(docname)
    measured = bool(this_build and scale == "paper")

    def over(value, limit):
        return bool(measured and limit and isinstance(value, (int, float)) and value > limit)

    return {"budget": budget, "over_budget": over(runtime, budget),
            "cpu_budget": cpu_budget, "over_cpu_budget": over(cpu_seconds, cpu_budget)}


def _budget_overruns(rows) -> list[str]:
    """One sentence per budget a notebook ran over (rows of :func:`execution_rows`)."""
    lines = []
    for item in rows:
        if item["over_budget"]:
            lines.append(f"{item['docname']} took {item['runtime']:.0f} s at paper scale, over its budget of "
                         f"{item['budget']} s (fedbandit.book.scale.CHAPTER_BUDGETS)")
        if item["over_cpu_budget"]:
            lines.append(f"{item['docname']} used {item['cpu_seconds']:.0f} CPU-s at paper scale, over its budget "
                         f"of {item['cpu_budget']} CPU-s (fedbandit.book.scale.CHAPTER_CPU_BUDGETS)")
    return lines


def _report_budgets(app, exception):
    """After the build: each notebook's time against its CI budget, logged and written to JSON.

    The budgets are for CI (a slower chapter is a regression to look at), not for readers, so
    they are not on the status page.
    """
    if exception is not None or not hasattr(app.env, "mystnb_config"):
        return
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    try:
        rows = execution_rows(app.env)
    except ImportError:  # pragma: no cover - myst-nb is always there in the book build
        return
    report = Path(app.outdir).parent / "execution-report.json"
    report.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    cache = getattr(app.env.mystnb_config, "execution_cache_path", None)
    if cache:
        mark = Path(cache).parent / BUILD_FINISHED_MARK
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.touch()
    for line in _budget_overruns(rows):
        logger.info(f"execution budget: {line}")
    logger.info(f"execution times against the CI budgets: {report}")


def _mark_build_start(app):
    app.env.fedbandit_build_started = time.time()


# ------------------------------------------------------------------ figure numbers per chapter

_CHAPTER_NUMBER = re.compile(r"(?:^|/)(\d+)_[^/]*$")


def chapter_number(docname: str) -> int | None:
    """The chapter number a document's file name carries (``chapters/01_dp20_gaps`` is 1), or None."""
    match = _CHAPTER_NUMBER.search(docname)
    return int(match.group(1)) if match else None


def _number_figures_per_document(app, env):
    """Renumber figures (and tables, code blocks) per chapter, after Sphinx numbered them.

    Sphinx (``numfig``) numbers across the whole book when the table of contents carries no
    section numbers ("Fig. 62" on the performance page).  Here a chapter's pages (the opener
    ``02_fixed_batch`` and its sub-pages ``02_2_...``, in table-of-contents order) count on from one
    another, prefixed by the chapter's number ("Fig. 2.3" ... "Fig. 2.14" on the next page); a page
    without a chapter number (introduction, performance) counts "Fig. 1, 2, ..." on its own.
    """
    fignumbers = getattr(env, "toc_fignumbers", None)
    if not fignumbers:
        return []
    rank = {doc: k for k, doc in enumerate(_ordered_docs(env))}
    counted: dict[tuple[int, str], int] = {}  # (chapter, figure type) -> numbers given on earlier pages
    changed = []
    for docname in sorted(fignumbers, key=lambda doc: (rank.get(doc, len(rank)), doc)):
        by_type = fignumbers[docname]
        chapter = chapter_number(docname)
        prefix = () if chapter is None else (chapter,)
        for figtype, numbers in by_type.items():
            start = 0 if chapter is None else counted.get((chapter, figtype), 0)
            ordered = sorted(numbers.items(), key=lambda item: item[1])
            renumbered = {ident: prefix + (start + k,) for k, (ident, _) in enumerate(ordered, 1)}
            if chapter is not None:
                counted[(chapter, figtype)] = start + len(ordered)
            if renumbered != numbers:
                by_type[figtype] = renumbered
                changed.append(docname)
    return sorted(set(changed))


# ------------------------------------------------------------------ glue:md from another page

def _cross_page_markdown_role():
    """myst-nb's ``{glue:md}`` role, also accepting ``other.ipynb::key`` (a key glued on another page).

    myst-nb pastes text, HTML and images across pages (a pending reference resolved after every page
    is read) but not markdown, so a chapter's Findings box could not quote, with its math, a verdict
    computed on one of the chapter's later pages.  The cross-page form makes a pending reference of
    type ``md``; :class:`_PasteMarkdownAcrossPages` resolves it.
    """
    from myst_nb.ext.glue.roles import PasteMarkdownRole
    from myst_nb.ext.glue.utils import PendingGlueReferenceError, create_pending_glue_ref, glue_warning

    class CrossPageMarkdownRole(PasteMarkdownRole):
        def run(self):
            if "::" not in self.text:
                return super().run()
            doc, key = self.text.split("::", 1)
            try:
                ref = create_pending_glue_ref(self.document, self.source, self.line, doc, key, inline=True, gtype="md")
            except PendingGlueReferenceError as exc:
                return [], [glue_warning(str(exc), self.document, self.line)]
            return [ref], []

    return CrossPageMarkdownRole()


def _register_cross_page_markdown(app, config):
    app.add_role_to_domain("glue", "md", _cross_page_markdown_role(), override=True)


def markdown_inline_nodes(text: str) -> list:
    """Inline MyST markdown (text, emphasis, ``$math$``, code) parsed into docutils nodes.

    Raises ``ValueError`` naming the text when it does not parse into one paragraph without errors
    (a role such as ``{ref}`` needs Sphinx's reading phase, which a cross-page paste comes after).
    """
    from docutils.core import publish_doctree
    from myst_parser.parsers.docutils_ import Parser

    doctree = publish_doctree(
        text, parser=Parser(),
        settings_overrides={"myst_enable_extensions": ["dollarmath"], "report_level": 5, "halt_level": 5},
    )
    problems = [m.astext() for m in doctree.findall(nodes.system_message)]
    paragraphs = [child for child in doctree.children if isinstance(child, nodes.paragraph)]
    if problems or len(paragraphs) != 1 or len(doctree.children) != 1:
        raise ValueError(f"markdown pasted across pages must be one paragraph of inline markdown, got {text!r}"
                         + (f" ({'; '.join(problems)})" if problems else ""))
    return [child for child in paragraphs[0].children if not (isinstance(child, nodes.Text) and not child.astext())]


class _PasteMarkdownAcrossPages(SphinxPostTransform):
    """Resolve ``{glue:md}`other.ipynb::key``` from the other page's glue cache, before myst-nb's own
    resolver (priority 5), which would otherwise paste the key's plain text."""

    default_priority = 4

    def run(self, **kwargs):
        from myst_nb.ext.glue.crossref import read_glue_cache
        from myst_nb.ext.glue.utils import PendingGlueReference
        from sphinx.util import logging as sphinx_logging

        logger = sphinx_logging.getLogger(__name__)
        for node in list(self.document.findall(PendingGlueReference)):
            if node.gtype != "md":
                continue
            data = read_glue_cache(self.env.mystnb_config.output_folder, node.refdoc).get(node.key, {}).get("data", {})
            if "text/markdown" not in data:
                logger.warning(f"no markdown glued as {node.key!r} on {node.refdoc!r}", location=node)
                node.parent.remove(node)
                continue
            try:
                node.replace_self(markdown_inline_nodes(data["text/markdown"]))
            except ValueError as exc:
                logger.warning(str(exc), location=node)
                node.parent.remove(node)


# ------------------------------------------------------------------ author-year bibliography labels


def _register_bibliography_style() -> None:
    """Register the pybtex formatting style ``fedbandit_author_year`` (author-year labels, sorted by author)."""
    try:
        from pybtex.plugin import register_plugin
        from pybtex.richtext import Text
        from pybtex.style.formatting.unsrt import Style as UnsrtStyle
        from pybtex.style.labels import BaseLabelStyle
    except ImportError:  # pragma: no cover - pybtex comes with sphinxcontrib-bibtex
        return
    from collections import Counter

    def last_name(person) -> str:
        return Text.from_latex(" ".join(person.prelast_names + person.last_names)).render_as("text")

    class AuthorYearLabels(BaseLabelStyle):
        """"Mironov, 2017", "Balle and Wang, 2018", "Bonawitz et al., 2017"; "2010a", "2010b" when equal."""

        def format_labels(self, sorted_entries):
            labels = [self.format_label(entry) for entry in sorted_entries]
            count, seen = Counter(labels), Counter()
            for label in labels:
                if count[label] == 1:
                    yield label
                else:
                    yield label + chr(ord("a") + seen[label])
                    seen[label] += 1

        def format_label(self, entry):
            people = entry.persons.get("author") or entry.persons.get("editor") or []
            names = [last_name(p) for p in people]
            if not names:
                who = entry.fields.get("key", entry.key)
            elif len(names) == 1:
                who = names[0]
            elif len(names) == 2:
                who = f"{names[0]} and {names[1]}"
            else:
                who = f"{names[0]} et al."
            year = entry.fields.get("year")
            return f"{who}, {year}" if year else who

    class AuthorYearStyle(UnsrtStyle):
        default_label_style = AuthorYearLabels
        default_sorting_style = "author_year_title"

    register_plugin("pybtex.style.formatting", "fedbandit_author_year", AuthorYearStyle, force=True)


# ------------------------------------------------------------------ the book's CSS

#: Explorers (fedbandit.book.explorer) on narrow screens: controls wrap, readouts show their whole
#: label, images scale down with the column instead of overflowing it.
BOOK_CSS = """
.fedbandit-explorer { max-width: 100%; }
.fedbandit-explorer .widget-hbox, .fedbandit-explorer .widget-box { flex-wrap: wrap; max-width: 100%; }
.fedbandit-explorer .widget-inline-hbox { max-width: 100%; flex-wrap: wrap; height: auto; }
.fedbandit-explorer .widget-readout { max-width: none; min-width: 0; overflow: visible; width: auto; }
.fedbandit-explorer .widget-label { width: auto; min-width: 0; max-width: 100%; }
.fedbandit-explorer .widget-slider, .fedbandit-explorer .widget-dropdown,
.fedbandit-explorer .widget-toggle-buttons { max-width: 100%; }
.fedbandit-explorer .widget-toggle-buttons .widget-toggle-button { width: auto; }
.fedbandit-explorer img { max-width: 100%; height: auto; }
"""


def _book_css(app, config):
    folder = Path(app.doctreedir).parent / "fedbandit-static"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "fedbandit.css").write_text(BOOK_CSS.lstrip(), encoding="utf-8")
    config.html_static_path = list(config.html_static_path) + [str(folder)]


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
    # The widget bundle asks for its icon fonts relative to the *page*: under
    # @jupyter-widgets/html-manager/dist/ from one of its scripts, under @jupyter-widgets/ from the
    # other (which one runs first varies from load to load); every page with widgets is in chapters/.
    widget_root = assets / "extra" / "chapters" / "@jupyter-widgets"
    for fonts in (widget_root / "html-manager" / "dist", widget_root):
        fonts.mkdir(parents=True, exist_ok=True)
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
    :data:`fedbandit.book.execution_cache.BOOK_BUILD_ENVIRONMENT` (the notebooks ``make book``
    executes ahead of Sphinx get the same).  A value already set wins.
    """
    for name, value in BOOK_BUILD_ENVIRONMENT.items():
        os.environ.setdefault(name, value)


def setup(app):
    """Sphinx's entry point for this extension (``extra_extensions`` in ``_config.yml``): connects its handlers to ``app``."""
    _figures_wrap_images_only()
    _register_bibliography_style()
    app.connect("builder-inited", _mark_build_start)
    app.connect("config-inited", _book_css)
    app.add_css_file("fedbandit.css")
    app.connect("env-get-updated", _number_figures_per_document, priority=900)
    app.connect("build-finished", _report_budgets)
    app.connect("config-inited", _static_build_environment)
    app.connect("config-inited", _theme_mode)
    app.add_js_file(None, body=MATHJAX2_HUB_SHIM, priority=510)
    app.connect("config-inited", _local_web_assets)
    app.add_node(reconstruction_list)
    app.add_node(execution_status)
    app.add_directive("reconstruction-list", ReconstructionListDirective)
    app.add_directive("execution-status", ExecutionStatusDirective)
    app.add_post_transform(_AggregatesTransform)
    app.connect("config-inited", _register_cross_page_markdown)
    app.add_post_transform(_PasteMarkdownAcrossPages)
    app.connect("doctree-read", _collect)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-get-updated", _outdated)
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 4}
