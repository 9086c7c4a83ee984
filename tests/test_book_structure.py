"""Static checks of what a reader of the book gets (issue 8).  Nothing is executed: the
notebooks, ``_toc.yml``, ``_config.yml``, ``references.bib`` and ``binder/`` are read as
files, so the whole module runs in a few seconds.

For every document in ``_toc.yml``:

* every chapter notebook starts with its label ``(chap-...)=`` and its title, and its first
  code cell is the install cell (``INSTALL_SOURCE``, hidden on the web page by the tag
  ``remove-cell``), followed by the cell that prints ``running at scale: ...`` (read by the
  execution-status page);
* notebooks are stored without outputs;
* every code cell that draws a figure has a numbered figure caption in its metadata,
  ``{"mystnb": {"figure": {"caption": ..., "name": "fig-<chapter>-..."}}}`` (myst-nb 1.4),
  names are unique, and every figure is referenced by ``{numref}`` somewhere in the book;
  cells that draw no figure carry no caption (myst-nb would caption their other outputs);
* every ``{ref}``/``{numref}`` target exists, the introduction links every chapter, every
  ``{cite}`` key is in ``references.bib`` and every entry of ``references.bib`` is cited;
* ``binder/`` installs the package and the launch buttons point at the repository the
  install cell installs from.

Which cells draw a figure is decided from the code: a top-level call of ``plt.show()`` or of
``finish(fig)`` (:func:`fedbandit.book.finish`), or of a function defined in the notebook that
(transitively) calls one of them.  Passing such a function
to ``widgets.interactive`` does not count: its output lives in the widget's saved state.
A drawing cell whose plot is followed by another display output (a ``display(...)`` call
or a last expression with a value, e.g. a widget) may only be captioned when
``fedbandit.book.sphinx_ext`` has ``_figures_wrap_images_only``: myst-nb 1.4 on its own
wraps every display output of a captioned cell in the figure, which duplicates the
figure's name (a fatal warning under ``-W``).  ``FEDBANDIT_EXECUTED_NOTEBOOKS`` (a folder
of executed copies of the chapters; ``make test`` sets it to those of its quick book build)
also checks this classification against the outputs they really produced.
"""

from __future__ import annotations

import ast
import os
import re
import tomllib
from functools import lru_cache
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

INSTALL_SOURCE = (
    "# On Colab or Binder without the package, install it (no-op when fedbandit is importable).\n"
    "import importlib.util\n"
    'if importlib.util.find_spec("fedbandit") is None:\n'
    '    %pip install --quiet "fedbandit[book] @ git+https://github.com/fedbandit/fedbandit"'
)
LABEL_RE = re.compile(r"^\((?P<name>[^()\s]+)\)=\s*$", re.M)
DIRECTIVE_NAME_RE = re.compile(r"^:name:\s*(?P<name>\S+)\s*$", re.M)
XREF_RE = re.compile(r"\{(?P<role>ref|numref)\}`(?P<body>[^`]+)`")
CITE_RE = re.compile(r"\{cite(?::[a-z]+)?\}`(?P<keys>[^`]+)`")
BIB_KEY_RE = re.compile(r"^@\w+\{\s*(?P<key>[^,\s]+)\s*,", re.M)
FIGURE_NAME_RE = re.compile(r"^fig-[a-z0-9]+(?:-[a-z0-9]+)*$")


# ---------------------------------------------------------------- the book's documents


def _toc_entries(node) -> list[str]:
    out = []
    if isinstance(node, dict):
        if "file" in node:
            out.append(node["file"])
        for key in ("parts", "chapters", "sections"):
            for child in node.get(key, []) or []:
                out.extend(_toc_entries(child))
    return out


@lru_cache(maxsize=None)
def _toc() -> dict:
    return yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def _documents() -> tuple[Path, ...]:
    toc = _toc()
    docs = []
    for entry in [toc["root"], *_toc_entries(toc)]:
        matches = [ROOT / f"{entry}{suffix}" for suffix in (".ipynb", ".md") if (ROOT / f"{entry}{suffix}").exists()]
        assert matches, f"_toc.yml lists {entry!r}, but neither {entry}.ipynb nor {entry}.md exists"
        docs.append(matches[0])
    return tuple(docs)


def _notebooks() -> list[Path]:
    return [p for p in _documents() if p.suffix == ".ipynb"]


@lru_cache(maxsize=None)
def _read(path: Path):
    return nbformat.read(path, as_version=4)


def _markdown(path: Path) -> str:
    """All markdown text of a document, figure captions included."""
    if path.suffix == ".md":
        return path.read_text(encoding="utf-8")
    nb = _read(path)
    parts = [c.source for c in nb.cells if c.cell_type == "markdown"]
    parts += [fig["caption"] for c in nb.cells if (fig := _figure_meta(c)) and "caption" in fig]
    return "\n".join(parts)


def _code_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


def _figure_meta(cell) -> dict | None:
    meta = cell.get("metadata", {}).get("mystnb") or {}
    return meta.get("figure")


def _extension_wraps_images_only() -> bool:
    import fedbandit.book.sphinx_ext as ext

    return hasattr(ext, "_figures_wrap_images_only")


def _ids(paths):
    return [p.relative_to(ROOT).as_posix() for p in paths]


# --------------------------------------------------- which code cells draw a figure


def _parse(source: str) -> ast.Module:
    from IPython.core.inputtransformer2 import TransformerManager

    return ast.parse(TransformerManager().transform_cell(source))


def _top_level_nodes(tree: ast.AST):
    """Every node of the cell that runs when the cell runs (not inside def/lambda/class)."""
    stack = list(ast.iter_child_nodes(tree))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _is_plt_show(call: ast.Call) -> bool:
    """``plt.show()``, or the book's ``finish(fig)`` (fedbandit.book.finish shows the checked figure)."""
    f = call.func
    if isinstance(f, ast.Name) and f.id == "finish":
        return True
    if isinstance(f, ast.Attribute) and f.attr == "finish":
        return True
    return isinstance(f, ast.Attribute) and f.attr == "show" and isinstance(f.value, ast.Name) and f.value.id in {"plt", "pyplot"}


def _called_name(call: ast.Call) -> str | None:
    return call.func.id if isinstance(call.func, ast.Name) else None


@lru_cache(maxsize=None)
def _functions(path: Path) -> tuple[frozenset, frozenset, frozenset]:
    """(functions that draw a figure, functions that return a value, functions that display
    another output, e.g. a Markdown table), defined in the notebook."""
    calls, shows, returns, displays = {}, set(), set(), set()
    for cell in _code_cells(_read(path)):
        for node in ast.walk(_parse(cell.source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                own = [n for n in ast.walk(node) if isinstance(n, ast.Call)]
                calls[node.name] = {_called_name(c) for c in own} - {None}
                if any(_is_plt_show(c) for c in own):
                    shows.add(node.name)
                if "display" in calls[node.name]:
                    displays.add(node.name)
                if any(isinstance(n, ast.Return) and n.value is not None
                       and not (isinstance(n.value, ast.Constant) and n.value.value is None) for n in ast.walk(node)):
                    returns.add(node.name)

    def closure(seed):  # a function that calls a drawing (displaying) function draws (displays) too
        out, changed = set(seed), True
        while changed:
            changed = False
            for name, callees in calls.items():
                if name not in out and callees & out:
                    out.add(name)
                    changed = True
        return frozenset(out)

    return closure(shows), frozenset(returns), closure(displays)


def _classify(path: Path, cell) -> tuple[bool, bool]:
    """(draws a figure, shows another display output besides it)."""
    draws_f, returns_f, displays_f = _functions(path)
    tree = _parse(cell.source)
    calls = [n for n in _top_level_nodes(tree) if isinstance(n, ast.Call)]
    draws = any(_is_plt_show(c) or _called_name(c) in draws_f for c in calls)
    other = any(_called_name(c) == "display" or _called_name(c) in displays_f
                or (isinstance(c.func, ast.Attribute) and c.func.attr == "display") for c in calls)
    # an explorer (fedbandit.book.make_explorer) shown as the cell's result is its figure
    explorers = {t.id for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                 and _called_name(n.value) == "make_explorer" for t in n.targets if isinstance(t, ast.Name)}
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        value = tree.body[-1].value
        if (isinstance(value, ast.Call) and _called_name(value) == "make_explorer") or (
                isinstance(value, ast.Name) and value.id in explorers):
            return True, other
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        value = tree.body[-1].value
        silent = isinstance(value, ast.Constant) and value.value is None
        if isinstance(value, ast.Call):
            name = _called_name(value)
            silent = (
                name in {"print", "display", "glue_number", "glue_text", "finish"}  # glued text displays nothing; finish returns None
                or (name in draws_f and name not in returns_f)
                or (isinstance(value.func, ast.Attribute) and isinstance(value.func.value, ast.Name)
                    and value.func.value.id == "plt")
            )
        other = other or not silent
    return draws, other


# ------------------------------------------------------------------------- the tests


def test_toc_lists_the_chapters_and_the_bibliography():
    docs = _documents()
    assert len(_notebooks()) >= 2, docs
    bib = [p for p in docs if p.suffix == ".md" and "```{bibliography}" in p.read_text(encoding="utf-8")]
    assert bib, "no page of the book holds the {bibliography} directive"


@pytest.mark.parametrize("path", _notebooks(), ids=_ids(_notebooks()))
def test_chapter_starts_with_label_and_title(path):
    first = _read(path).cells[0]
    assert first.cell_type == "markdown", f"{path.name}: the first cell must be markdown"
    lines = first.source.splitlines()
    assert LABEL_RE.match(lines[0]) and lines[0].startswith("(chap-"), f"{path.name}: first line {lines[0]!r} is not (chap-...)="
    assert lines[1].startswith("# "), f"{path.name}: second line {lines[1]!r} is not the '# Title'"


@pytest.mark.parametrize("path", _notebooks(), ids=_ids(_notebooks()))
def test_install_cell_comes_first(path):
    code = _code_cells(_read(path))
    assert code and code[0].source == INSTALL_SOURCE, (
        f"{path.name}: the first code cell must be exactly the install cell (see tests/test_book_structure.py)"
    )
    assert "remove-cell" in code[0].metadata.get("tags", []), f"{path.name}: tag the install cell 'remove-cell'"
    assert len(code) > 1 and re.search(r"running at scale: \{", code[1].source), (
        f"{path.name}: the cell after the install cell must print 'running at scale: ...' (execution-status page)"
    )


@pytest.mark.parametrize("path", _notebooks(), ids=_ids(_notebooks()))
def test_stored_without_outputs(path):
    dirty = [i for i, c in enumerate(_read(path).cells)
             if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, f"{path.name}: cells {dirty} are stored with outputs or execution counts"


@pytest.mark.parametrize("path", _notebooks(), ids=_ids(_notebooks()))
def test_figures_are_captioned_and_named(path):
    nb = _read(path)
    label = LABEL_RE.match(nb.cells[0].source.splitlines()[0]).group("name")
    prefix = "fig-" + label.removeprefix("chap-") + "-"
    mixed_ok = _extension_wraps_images_only()
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        draws, other = _classify(path, cell)
        fig = _figure_meta(cell)
        where = f"{path.name} cell {i} ({cell.source.splitlines()[0][:50]!r})"
        if not draws:
            if fig is not None:
                problems.append(f"{where}: draws no figure but has a figure caption")
            continue
        if other and not mixed_ok:
            if fig is not None:
                problems.append(f"{where}: shows other outputs besides its figure; without "
                                "fedbandit.book.sphinx_ext._figures_wrap_images_only myst-nb captions all of them")
            continue
        if not fig or not str(fig.get("caption", "")).strip():
            problems.append(f"{where}: draws a figure without mystnb.figure.caption")
        elif not FIGURE_NAME_RE.match(str(fig.get("name", ""))) or not fig["name"].startswith(prefix):
            problems.append(f"{where}: figure name {fig.get('name')!r} should look like {prefix}<short>")
    assert not problems, "\n".join(problems)


def _figure_names() -> dict[str, str]:
    names: dict[str, str] = {}
    for path in _notebooks():
        for cell in _read(path).cells:
            fig = _figure_meta(cell) if cell.cell_type == "code" else None
            if fig and fig.get("name"):
                assert fig["name"] not in names, f"figure name {fig['name']} used in {names[fig['name']]} and {path.name}"
                names[fig["name"]] = path.name
    return names


def test_figure_names_unique_and_referenced():
    names = _figure_names()
    text = "\n".join(_markdown(p) for p in _documents())
    referenced = {m.group("body").split("<")[-1].rstrip(">").strip() for m in XREF_RE.finditer(text) if m.group("role") == "numref"}
    unreferenced = sorted(set(names) - referenced)
    assert not unreferenced, f"figures never referenced with {{numref}}: {[(n, names[n]) for n in unreferenced]}"


def test_cross_references_resolve():
    targets = set(_figure_names())
    for path in _documents():
        text = _markdown(path)
        targets |= {m.group("name") for m in LABEL_RE.finditer(text)}
        targets |= {m.group("name") for m in DIRECTIVE_NAME_RE.finditer(text)}
    missing = []
    for path in _documents():
        for m in XREF_RE.finditer(_markdown(path)):
            target = m.group("body").split("<")[-1].rstrip(">").strip()
            if target not in targets:
                missing.append(f"{path.name}: {{{m.group('role')}}}`{m.group('body')}`")
    assert not missing, "unresolved references:\n" + "\n".join(missing)


def headings_with_math(text: str) -> dict[str, str]:
    """Labels whose heading holds math: a bare ``{ref}`` to one shows the heading's raw TeX as its link text."""
    found = {}
    for m in LABEL_RE.finditer(text):
        heading = next((line for line in text[m.end():].splitlines()[:3] if line.startswith("#")), "")
        if "$" in heading:
            found[m.group("name")] = heading
    return found


def bare_refs_to_math_headings(texts: list[str]) -> list[str]:
    """``{ref}`label``` (no link text of its own) to a heading with math, in any of ``texts``."""
    mathy = {}
    for text in texts:
        mathy |= headings_with_math(text)
    return [f"{{ref}}`{m.group('body')}` -> {mathy[m.group('body').strip()]}" for text in texts
            for m in XREF_RE.finditer(text) if m.group("role") == "ref" and m.group("body").strip() in mathy]


def test_no_bare_reference_to_a_heading_with_math():
    """Chapter 4's opener linked "Error against \\varepsilon" (raw TeX in the link): such references say their text."""
    assert bare_refs_to_math_headings([_markdown(path) for path in _documents()]) == []
    planted = "(sec-x)=\n## Error against $\\varepsilon$\n\nSee {ref}`sec-x` and {ref}`the error <sec-x>`."
    assert bare_refs_to_math_headings([planted]) == ["{ref}`sec-x` -> ## Error against $\\varepsilon$"]


def test_introduction_links_every_chapter():
    root, *rest = _documents()
    intro = _markdown(root)
    linked = {m.group("body").split("<")[-1].rstrip(">").strip() for m in XREF_RE.finditer(intro)}
    missing = []
    for path in rest:
        if path.suffix != ".ipynb" or re.match(r"\d+_\d+_", path.name):  # a chapter's later page: its opener is linked
            continue
        label = LABEL_RE.match(_read(path).cells[0].source.splitlines()[0]).group("name")
        if label not in linked:
            missing.append(f"{path.name} ({label})")
    assert not missing, f"the introduction's map of the book does not link: {missing}"


def test_every_bibliography_entry_is_cited_and_every_citation_exists():
    keys = set(BIB_KEY_RE.findall((ROOT / "references.bib").read_text(encoding="utf-8")))
    cited = set()
    for path in _documents():
        for m in CITE_RE.finditer(_markdown(path)):
            cited |= {k.strip() for k in m.group("keys").split(",")}
    assert not cited - keys, f"cited but not in references.bib: {sorted(cited - keys)}"
    assert not keys - cited, f"in references.bib but cited nowhere in the book: {sorted(keys - cited)}"


def test_binder_environment_installs_the_package():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert pyproject["name"] == "fedbandit" and "book" in pyproject["optional-dependencies"]
    lines = [ln.split("#", 1)[0].strip() for ln in (ROOT / "binder" / "requirements.txt").read_text().splitlines()]
    assert "-e .[book]" in lines, "binder/requirements.txt must install this repository with the book extra"
    runtime = (ROOT / "binder" / "runtime.txt").read_text().strip()
    version = runtime.removeprefix("python-")
    assert runtime.startswith("python-3.") and version
    from packaging.specifiers import SpecifierSet

    assert version in SpecifierSet(pyproject["requires-python"]), f"{runtime} vs requires-python {pyproject['requires-python']}"
    start = ROOT / "binder" / "start"
    assert os.access(start, os.X_OK) and 'exec "$@"' in start.read_text(), "binder/start must be executable and exec its arguments"


def test_launch_buttons_match_the_install_cell():
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    repo, launch = config["repository"], config["launch_buttons"]
    assert repo["branch"] == "main" and launch.get("binderhub_url") and launch.get("colab_url")
    url = repo["url"].rstrip("/")
    assert f"git+{url}" in INSTALL_SOURCE, f"the install cell installs from elsewhere than {url}"


WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"


def test_figure_classification_matches_executed_outputs():
    """The static classification against real outputs (FEDBANDIT_EXECUTED_NOTEBOOKS).

    ``make test`` runs it on the notebooks its quick book build executed
    (``_build/quick/_build/jupyter_execute/chapters``: no extra execution); then every
    chapter must be there and executed.  ``FEDBANDIT_EXECUTED_NOTEBOOKS_PARTIAL=1`` allows
    a folder with only some chapters (a local check).
    """
    folder = os.environ.get("FEDBANDIT_EXECUTED_NOTEBOOKS")
    if not folder:
        pytest.skip("set FEDBANDIT_EXECUTED_NOTEBOOKS to a folder of executed chapter notebooks (make test does)")
    partial = os.environ.get("FEDBANDIT_EXECUTED_NOTEBOOKS_PARTIAL") == "1"
    compared = 0
    for path in _notebooks():
        executed = Path(folder) / path.name
        if not executed.exists():
            assert partial, f"{path.name} has no executed copy in {folder}"
            continue
        executed_nb = nbformat.read(executed, as_version=4)
        assert any(c.outputs for c in _code_cells(executed_nb)), f"{executed} has no outputs: it was not executed"
        done = {c.source: c for c in _code_cells(executed_nb)}
        for cell in _code_cells(_read(path)):
            if cell.source not in done:
                continue
            outs = [o for o in done[cell.source].outputs if o.output_type in ("display_data", "execute_result")]
            # a figure is an image, or an explorer's widget view (its figures live in the widget state)
            images = [o for o in outs if any(m.startswith("image/") or m == WIDGET_VIEW_MIME for m in o.data)]
            draws, other = _classify(path, cell)
            assert draws == bool(images), f"{path.name}: {cell.source.splitlines()[0]!r} draws={draws}, images={len(images)}"
            if draws:
                assert other == (len(outs) > len(images)), f"{path.name}: {cell.source.splitlines()[0]!r} other={other}"
            compared += 1
    assert compared, f"no executed notebook in {folder} matches a chapter"


def test_every_notebook_has_a_time_budget_and_the_book_fits_its_own():
    """One run-time and one CPU-time budget per executed page (the build compares each chapter's
    times with them), and each kind adds up to at most the whole book's times the notebooks make
    book runs at a time (two on two cores: each chapter's run-time budget is its time beside
    another chapter, and two cores give at most two CPU-seconds a second)."""
    from fedbandit.book.scale import BOOK_BUDGET, BOOK_JOBS, CHAPTER_BUDGETS, CHAPTER_CPU_BUDGETS

    notebooks = {str(p.relative_to(ROOT).with_suffix("")) for p in _documents() if p.suffix == ".ipynb"}
    assert set(CHAPTER_BUDGETS) == notebooks
    assert set(CHAPTER_CPU_BUDGETS) == notebooks
    assert sum(CHAPTER_BUDGETS.values()) <= BOOK_JOBS * BOOK_BUDGET, sum(CHAPTER_BUDGETS.values())
    assert sum(CHAPTER_CPU_BUDGETS.values()) <= BOOK_JOBS * BOOK_BUDGET, sum(CHAPTER_CPU_BUDGETS.values())
    assert "--execute $(JOBS)" in (ROOT / "Makefile").read_text() and "JOBS ?= 2" in (ROOT / "Makefile").read_text()
    assert BOOK_JOBS == 2


# ------------------------------------------------------------------ sources a reader can trust (issue 26)

#: Entries of references.bib without a DOI, URL or arXiv identifier, because none could be verified
#: when links were added (2026-12-06, issue 26): a link is added only when it was checked.
#: Remove an entry when its link is added; an entry that has a link is an error here.
UNLINKED_ENTRIES = {
    "li2022federated": "2026-12-06: no DOI or link verified (IEEE ISIT 2020)",
    "dwork2010differential": "2026-12-06: DOI not verified (ACM STOC 2010)",
    "zhu2019poisson": "2026-12-06: proceedings link not verified (ICML 2019, PMLR 97)",
    "beutel2020flower": "2026-12-06: the arXiv number in its journal field is not verified",
    "bell2020secure": "2026-12-06: DOI not verified (ACM CCS 2020)",
    "henzinger2023almost": "2026-12-06: no arXiv number or DOI verified (SODA 2023)",
    "kalinin2024banded": "2026-12-06: no arXiv number or proceedings link verified (NeurIPS 2024)",
    "honaker2015efficient": "issue 24: no link verified (TPDP 2015 workshop paper, no proceedings)",
}
LINK_FIELDS = ("doi", "url", "eprint")


def _bib_entries() -> dict[str, dict[str, str]]:
    import pybtex.database

    db = pybtex.database.parse_file(str(ROOT / "references.bib"))
    return {key: {name.lower(): value for name, value in entry.fields.items()} for key, entry in db.entries.items()}


def test_every_bibliography_entry_has_a_doi_or_link():
    entries = _bib_entries()
    missing = sorted(k for k, fields in entries.items() if not any(f in fields for f in LINK_FIELDS))
    assert set(missing) <= set(UNLINKED_ENTRIES), f"entries without doi, url or eprint: {sorted(set(missing) - set(UNLINKED_ENTRIES))}"
    stale = sorted(set(UNLINKED_ENTRIES) - set(missing))
    assert not stale, f"these entries have a link now: remove them from UNLINKED_ENTRIES: {stale}"
    for key, fields in entries.items():
        if "doi" in fields:
            assert re.fullmatch(r"10\.\d{4,9}/\S+", fields["doi"]), f"{key}: doi {fields['doi']!r} is not a bare DOI"
        if "eprint" in fields:
            assert re.fullmatch(r"\d{4}\.\d{4,5}", fields["eprint"]), f"{key}: eprint {fields['eprint']!r} is not an arXiv number"
            assert fields.get("archiveprefix", "").lower() == "arxiv", f"{key}: eprint without archiveprefix = arXiv"
        if "url" in fields:
            assert fields["url"].startswith("https://"), f"{key}: url {fields['url']!r}"


def _cff_schema() -> dict:
    import json

    import check_jsonschema

    vendored = Path(check_jsonschema.__file__).parent / "builtin_schemas" / "vendor" / "citation-file-format.json"
    return json.loads(vendored.read_text(encoding="utf-8"))


def cff_problems(cff: dict) -> list[str]:
    """Why ``cff`` (a parsed CITATION.cff) is not valid CFF 1.2 or does not describe this repository."""
    import jsonschema

    schema = _cff_schema()
    validator = jsonschema.validators.validator_for(schema)(schema, format_checker=jsonschema.FormatChecker())
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in validator.iter_errors(cff)]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    if str(cff.get("cff-version")) != "1.2.0":
        problems.append(f"cff-version {cff.get('cff-version')!r}, not 1.2.0")
    if str(cff.get("version")) != project["version"]:
        problems.append(f"version {cff.get('version')!r} differs from pyproject.toml's {project['version']!r}")
    if cff.get("title") != config["title"]:
        problems.append(f"title {cff.get('title')!r} differs from the book's {config['title']!r}")
    if cff.get("repository-code") != config["repository"]["url"]:
        problems.append(f"repository-code {cff.get('repository-code')!r} is not {config['repository']['url']!r}")
    return problems


def test_citation_cff_is_valid_and_describes_this_repository():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    problems = cff_problems(cff)
    assert not problems, "\n".join(problems)


def test_the_citation_check_can_fail():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff_problems({k: v for k, v in cff.items() if k != "authors"}), "a CFF without authors must be invalid"
    assert cff_problems({**cff, "version": "9.9.9"}), "a version other than pyproject's must be refused"
    assert cff_problems({**cff, "references": [{"type": "conference-paper", "title": "x"}]})  # no authors


GLOSSARY = ROOT / "chapters" / "glossary.md"
TERM_RE = re.compile(r"\{term\}`(?P<body>[^`]+)`")


def glossary_terms(text: str) -> dict[str, str]:
    """Term -> definition of the ``{glossary}`` directive in ``text``."""
    block = re.search(r"```\{glossary\}\n(.*?)\n```", text, re.S)
    assert block, "no {glossary} directive"
    terms: dict[str, str] = {}
    current = None
    for line in block.group(1).splitlines():
        if not line.strip() or line.startswith(":"):
            continue
        if not line.startswith(" "):
            current = line.strip()
            terms[current] = ""
        elif current is not None:
            terms[current] += line.strip() + " "
    return terms


def test_glossary_defines_each_term_with_its_source():
    assert "chapters/glossary" in _toc_entries(_toc()), "_toc.yml does not list the glossary"
    terms = glossary_terms(GLOSSARY.read_text(encoding="utf-8"))
    needed = {"p-sum", "PSCO", "silo-level LDP", "SDP", "Fed-DP", "zCDP", "RDP", "PLD", "SecAgg", "DDG",
              "concurrent shuffle", "continual release", "prefix sum", "tree mechanism", "matrix factorization"}
    assert needed <= set(terms), f"the glossary lacks {sorted(needed - set(terms))}"
    uncited = sorted(t for t, definition in terms.items() if not CITE_RE.search(definition))
    assert not uncited, f"glossary terms whose definition cites no source: {uncited}"


def test_term_references_resolve_to_the_glossary():
    terms = set(glossary_terms(GLOSSARY.read_text(encoding="utf-8")))
    missing = []
    for path in _documents():
        for m in TERM_RE.finditer(_markdown(path)):
            target = m.group("body").split("<")[-1].rstrip(">").strip()
            if target not in terms:
                missing.append(f"{path.name}: {{term}}`{m.group('body')}`")
    assert not missing, "terms not in the glossary:\n" + "\n".join(missing)


def test_bibliography_style_labels_author_year():
    """The pybtex style of fedbandit.book.sphinx_ext labels the references as the text cites them."""
    import pybtex.database
    from pybtex.plugin import find_plugin

    from fedbandit.book import sphinx_ext

    sphinx_ext._register_bibliography_style()
    style = find_plugin("pybtex.style.formatting", "fedbandit_author_year")()
    db = pybtex.database.parse_file(str(ROOT / "references.bib"))
    labels = {entry.key: entry.label for entry in style.format_entries(db.entries.values())}
    assert labels["dubey2020differentially"] == "Dubey and Pentland, 2020"
    assert labels["abbasi2011improved"] == "Abbasi-Yadkori et al., 2011"
    assert labels["mironov2017renyi"] == "Mironov, 2017"
    assert labels["nasr2023tight"] == "Nasr et al., 2023"
    # two "Dwork et al., 2010" are told apart
    assert {labels["dwork2010differential"], labels["dwork2010boosting"]} == {"Dwork et al., 2010a", "Dwork et al., 2010b"}
    assert len(set(labels.values())) == len(labels)


class _Config:
    root_doc = "chapters/intro"


class _Env:
    """What figure numbering reads of Sphinx's environment: the numbers and the table of contents."""

    def __init__(self, fignumbers, includes=None):
        self.toc_fignumbers = fignumbers
        self.config = _Config()
        self.toctree_includes = includes or {}
        self.found_docs = set(fignumbers) | {"chapters/intro"}


def test_figures_are_renumbered_per_chapter():
    from fedbandit.book.sphinx_ext import _number_figures_per_document, chapter_number

    assert chapter_number("chapters/01_dp20_gaps") == 1 and chapter_number("chapters/06_side_by_side") == 6
    assert chapter_number("chapters/02_3_within_batch_leak") == 2
    assert chapter_number("chapters/intro") is None and chapter_number("chapters/performance") is None
    # chapter 2's pages in table-of-contents order: the opener, then 02_3 before 02_2 (the order is the
    # toc's, not the file names'); chapter 3 and the performance page count on their own
    includes = {
        "chapters/intro": ["chapters/02_fixed_batch", "chapters/03_consensus_ucb", "chapters/performance"],
        "chapters/02_fixed_batch": ["chapters/02_3_leak", "chapters/02_2_amplification"],
    }
    env = _Env({
        "chapters/02_fixed_batch": {"figure": {"fig-a": (14,), "fig-b": (15,)}, "table": {"t": (3,)}},
        "chapters/02_2_amplification": {"figure": {"fig-d": (19,)}},
        "chapters/02_3_leak": {"figure": {"fig-c": (16,)}, "table": {"u": (4,)}},
        "chapters/03_consensus_ucb": {"figure": {"fig-e": (20,)}},
        "chapters/performance": {"figure": {"fig-perf": (62,)}},
        "chapters/intro": {"figure": {"fig-intro": (1,)}},
    }, includes)
    changed = _number_figures_per_document(None, env)
    numbers = env.toc_fignumbers
    assert numbers["chapters/02_fixed_batch"]["figure"] == {"fig-a": (2, 1), "fig-b": (2, 2)}
    assert numbers["chapters/02_fixed_batch"]["table"] == {"t": (2, 1)}
    assert numbers["chapters/02_3_leak"] == {"figure": {"fig-c": (2, 3)}, "table": {"u": (2, 2)}}
    assert numbers["chapters/02_2_amplification"]["figure"] == {"fig-d": (2, 4)}
    assert numbers["chapters/03_consensus_ucb"]["figure"] == {"fig-e": (3, 1)}
    assert numbers["chapters/performance"]["figure"] == {"fig-perf": (1,)}
    assert numbers["chapters/intro"]["figure"] == {"fig-intro": (1,)}
    assert changed == ["chapters/02_2_amplification", "chapters/02_3_leak", "chapters/02_fixed_batch",
                       "chapters/03_consensus_ucb", "chapters/performance"]
    assert _number_figures_per_document(None, env) == []  # already per chapter


def test_markdown_pasted_across_pages_keeps_its_math():
    """The cross-page ``{glue:md}`` form parses the glued markdown as the page would (math, emphasis), and
    refuses what it cannot render there (a Sphinx role, several paragraphs) instead of pasting it raw."""
    from docutils import nodes

    from fedbandit.book.sphinx_ext import markdown_inline_nodes

    got = markdown_inline_nodes("the audit bounds $\\varepsilon \\ge 3.2$: **not private**")
    assert [(type(n), n.astext()) for n in got] == [
        (nodes.Text, "the audit bounds "), (nodes.math, "\\varepsilon \\ge 3.2"), (nodes.Text, ": "),
        (nodes.strong, "not private")]
    for bad in ("see {ref}`sec-x`", "one\n\ntwo"):
        with pytest.raises(ValueError, match="one paragraph of inline markdown"):
            markdown_inline_nodes(bad)


def test_a_package_change_also_drops_sphinx_doctrees(tmp_path, monkeypatch):
    """Sphinx re-reads only changed sources: without dropping its doctrees, pages would keep the
    outputs of the older package even though the execution cache was reset."""
    from fedbandit.book import execution_cache

    build = tmp_path / "_build"
    (build / ".jupyter_cache").mkdir(parents=True)
    (build / ".doctrees").mkdir()
    (build / ".doctrees" / "environment.pickle").write_bytes(b"old env")
    execution_cache.sync_execution_cache(build / ".jupyter_cache")
    assert not (build / ".doctrees").exists()
    (build / ".doctrees").mkdir()
    execution_cache.sync_execution_cache(build / ".jupyter_cache")  # same source: kept
    assert (build / ".doctrees").exists()
    monkeypatch.setattr(execution_cache, "package_source_hash", lambda: "e" * 64)
    execution_cache.sync_execution_cache(build / ".jupyter_cache")
    assert not (build / ".doctrees").exists()
