"""The package's layout rules, checked on the source tree.

* at most six modules at the top level of ``fedbandit/``;
* no module outside ``fedbandit/accounting/`` calibrates noise: none divides by a privacy
  parameter (``epsilon``, ``eps``, ...) -- the theory modules' bounds excepted, which compute
  regret and error rates, not noise;
* every subpackage re-exports exactly the public names of its modules (``__all__``);
* chapters import from the subpackages (``from fedbandit.protocols import create``), never
  from a module inside one;
* every protocol the registry lists is built from Randomizer, Intermediary and Analyzer objects.
"""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "fedbandit"
PRIVACY_NAMES = {"epsilon", "eps", "eps0", "epsilon0", "eps_node", "target_epsilon", "eps_b", "epsilon_message"}


def _modules(folder):
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def test_at_most_six_top_level_modules():
    top = [p.name for p in PKG.glob("*.py")]
    assert len(top) <= 6, top


def _divides_by_privacy(tree):
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv)):
            right = node.right
            names = {n.id for n in ast.walk(right) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(right) if isinstance(n, ast.Attribute)}
            if names & PRIVACY_NAMES:
                hits.append(node.lineno)
    return hits


def test_no_noise_calibration_outside_accounting():
    offenders = {}
    for path in _modules(PKG):
        rel = path.relative_to(PKG)
        if rel.parts[0] in ("accounting", "theory"):
            continue
        hits = _divides_by_privacy(ast.parse(path.read_text()))
        if hits:
            offenders[str(rel)] = hits
    assert not offenders, f"noise scales computed outside fedbandit/accounting: {offenders}"


def test_the_calibration_check_can_fail():
    assert _divides_by_privacy(ast.parse("scale = levels / epsilon")) == [1]
    assert _divides_by_privacy(ast.parse("b = 2 * s / self.epsilon")) == [1]
    assert _divides_by_privacy(ast.parse("x = a / b")) == []


#: Sub-packages whose names their parent does not re-export: optional dependencies, imported by name.
OPTIONAL_SUBPACKAGES = {"integrations/flower"}


@pytest.mark.parametrize("pkg", sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").exists()))
def test_subpackages_reexport_their_public_names(pkg):
    mod = importlib.import_module(f"fedbandit.{pkg}")
    expected = []
    # its modules, and its sub-packages' __init__ (a module split into one file per part, as
    # fedbandit.protocols.statistics; not an optional integration, imported by name only)
    subpackages = [p for p in (PKG / pkg).glob("*/__init__.py") if f"{pkg}/{p.parent.name}" not in OPTIONAL_SUBPACKAGES]
    for path in sorted([*(PKG / pkg).glob("*.py"), *subpackages]):
        if path.stem.startswith("_") and path.parent == PKG / pkg:
            continue
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                expected += [e.value for e in node.value.elts]
    assert sorted(mod.__all__) == sorted(expected), "run .dev/gen_inits.py (the re-exports are generated)"
    for name in expected:
        assert getattr(mod, name) is not None


def test_chapters_import_from_subpackages():
    bad = []
    for nb in sorted((ROOT / "chapters").glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            for line in "".join(cell["source"]).splitlines():
                s = line.strip()
                if s.startswith("from fedbandit.") and s.split()[1].count(".") > 1:
                    target = PKG.joinpath(*s.split()[1].split(".")[1:])
                    if not (target / "__init__.py").exists():  # a nested subpackage is a subpackage
                        bad.append((nb.name, s))
    assert not bad, bad


def test_every_registered_protocol_is_composed_of_parts():
    from fedbandit.protocols import Analyzer, Intermediary, Protocol, Randomizer, available, create, describe

    for name in available():
        params = describe(name).parameters
        kw = {k: v for k, v in dict(epsilon=1.0, delta=1e-5, force=True).items() if k in params}
        p = create(name, **kw)
        assert isinstance(p, Protocol) and p.name == name
        assert isinstance(p.randomizer, Randomizer) and isinstance(p.intermediary, Intermediary)
        assert isinstance(p.analyzer, Analyzer)


#: The layer order of /DESIGN (a module may import only from its own layer or below; the
#: contract reads function-level imports too).  Same-rank layers may import each other.
LAYERS = {"_validation": 0, "_registry": 0, "accounting": 1, "mechanisms": 2, "protocols": 3, "secagg": 3, "envs": 4,
          "theory": 4, "learners": 5, "audit": 6, "experiments": 7, "integrations": 8, "book": 9}


def _fedbandit_imports(tree):
    """Top-level fedbandit subpackages a module imports, anywhere in it (function bodies included)."""
    out = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names if node.module == "fedbandit"]
        for name in names:
            parts = name.split(".")
            if parts[0] == "fedbandit" and len(parts) > 1 and parts[1] in LAYERS:
                out.add(parts[1])
    return out


def _layer_violations():
    bad = []
    for path in _modules(PKG):
        rel = path.relative_to(PKG)
        own = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        if own not in LAYERS:
            continue
        for dep in _fedbandit_imports(ast.parse(path.read_text())):
            if LAYERS[dep] > LAYERS[own]:
                bad.append((str(rel), dep))
    return bad


def test_integrations_respect_the_layer_order():
    # integrations sit above experiments and below book: nothing below imports them, and
    # they import nothing from the book
    bad = [(m, dep) for m, dep in _layer_violations() if "integrations" in (dep, m.split("/")[0])]
    assert not bad, bad
    assert _fedbandit_imports(ast.parse("def f():\n    from fedbandit.integrations.flower import ddg_mod")) == {"integrations"}


def test_flwr_is_imported_only_inside_integrations_flower():
    offenders = []
    for path in _modules(PKG):
        rel = path.relative_to(PKG)
        if rel.parts[:2] == ("integrations", "flower"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(m == "flwr" or m.startswith("flwr.") for m in mods):
                offenders.append(str(rel))
    assert not offenders, offenders


# --- one version source: pyproject.toml -------------------------------------------------------


def _pyproject_version(root=ROOT):
    import tomllib

    return tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def _version_literals(tree):
    """Line numbers of assignments of a string literal to ``__version__`` in a module's AST."""
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        names = {t.id for t in targets if isinstance(t, ast.Name)} | {t.attr for t in targets if isinstance(t, ast.Attribute)}
        if "__version__" in names and isinstance(value, ast.Constant) and isinstance(value.value, str):
            hits.append(node.lineno)
    return hits


def test_version_is_pyprojects():
    import fedbandit

    assert fedbandit.__version__ == _pyproject_version()


def test_no_module_types_a_version_literal():
    offenders = {str(p.relative_to(PKG)): h for p in _modules(PKG) if (h := _version_literals(ast.parse(p.read_text())))}
    assert not offenders, f"__version__ typed as a literal (pyproject.toml is the one source): {offenders}"
    assert _version_literals(ast.parse('__version__ = "0.2.0"\nx: str = "1"\n__version__: str = "3"')) == [1, 3]
    assert _version_literals(ast.parse("__version__ = _version()")) == []


def _load_init_from(root):
    """Execute a copy of fedbandit/__init__.py placed at ``root/fedbandit`` (not registered in sys.modules)."""
    import importlib.util

    (root / "fedbandit").mkdir()
    init = root / "fedbandit" / "__init__.py"
    init.write_text((PKG / "__init__.py").read_text())
    spec = importlib.util.spec_from_file_location("fedbandit", init)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_version_is_read_from_the_checkouts_pyproject(tmp_path):
    # a checkout whose pyproject says 9.8.7 reports 9.8.7, whatever an installed copy's metadata says
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "fedbandit"\nversion = "9.8.7"\n')
    assert _load_init_from(tmp_path).__version__ == "9.8.7"


def test_version_ignores_another_projects_pyproject(tmp_path):
    # the package vendored inside another project: that project's version is not ours, and
    # the installed distribution's metadata is used instead
    import importlib.metadata

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\nversion = "9.8.7"\n')
    try:
        expected = importlib.metadata.version("fedbandit")
    except importlib.metadata.PackageNotFoundError:
        expected = "0+unknown"
    assert _load_init_from(tmp_path).__version__ == expected != "9.8.7"


def test_version_without_pyproject_or_metadata_is_unknown(tmp_path, monkeypatch):
    import importlib.metadata

    def absent(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", absent)
    assert _load_init_from(tmp_path).__version__ == "0+unknown"


def test_installed_metadata_is_pyprojects_when_installed_from_this_checkout():
    # `make test` installs this checkout editable (pip install -e '.[test]'), so the metadata
    # must carry pyproject's version; an install made from another checkout (e.g. a git
    # worktree run with PYTHONPATH), or one without a direct_url.json record (an index install,
    # a source tree's fedbandit.egg-info), is not this test's business.
    import importlib.metadata
    from urllib.parse import unquote, urlparse

    def origin(dist):
        url = urlparse(json.loads(dist.read_text("direct_url.json") or "{}").get("url", ""))
        return Path(unquote(url.path)).resolve() if url.scheme == "file" else None

    dists = list(importlib.metadata.distributions(name="fedbandit"))
    ours = [d for d in dists if origin(d) == ROOT]
    if not ours:
        found = ", ".join(f"{d.version} from {origin(d) or 'no direct_url record'}" for d in dists) or "none"
        pytest.skip(f"no fedbandit installed from {ROOT} (found: {found})")
    assert {d.version for d in ours} == {_pyproject_version()}


# --- the layer contract of [tool.importlinter] (run by `make test`'s lint stage) ---------------


def _lint_imports(root):
    """Exit status and output of import-linter run on the package tree and pyproject.toml in ``root``.

    import-linter puts its working directory first on ``sys.path``, so the tree in ``root`` is
    the one analysed (not an installed copy).
    """
    import subprocess
    import sys

    pytest.importorskip("importlinter", reason="import-linter is in the test extra (pip install -e '.[test]')")
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    proc = subprocess.run([sys.executable, "-c", code, "--no-cache", "--no-logo"], cwd=root, capture_output=True,
                          text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def _package_copy(tmp_path):
    import shutil

    shutil.copytree(PKG, tmp_path / "fedbandit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_layer_contract_holds():
    status, out = _lint_imports(ROOT)
    assert status == 0 and "BROKEN" not in out, out


@pytest.mark.parametrize("module, planted, reason", [
    # a back-edge: the accounting layer importing the integrations (inside a function: grimp reads those too)
    ("accounting/_planted.py", "def f():\n    from fedbandit.integrations import flower\n",
     "fedbandit.accounting is not allowed to import fedbandit.integrations"),
    # "|" siblings must not import each other
    ("_validation.py", "\n\ndef _planted():\n    from fedbandit import _registry\n",
     "fedbandit._validation is not allowed to import fedbandit._registry"),
    # a new subpackage that the layer list does not place (the contract is exhaustive)
    ("newlayer/__init__.py", "X = 1\n", "not listed as layers: - fedbandit.newlayer"),
])
def test_layer_contract_can_fail(tmp_path, module, planted, reason):
    path = _package_copy(tmp_path) / "fedbandit" / module
    path.parent.mkdir(exist_ok=True)
    path.write_text((path.read_text() if path.exists() else "") + planted)
    status, out = _lint_imports(tmp_path)
    assert status != 0 and "BROKEN" in out and reason in " ".join(out.split()), out
