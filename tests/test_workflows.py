"""Static checks of the GitHub workflows (they cannot run here): the built-in
GitHub-workflow JSON schema of check-jsonschema, zizmor's offline audits with no
high-severity finding, and both workflows calling the same make targets as
everything else."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent


def test_there_are_two_workflows():
    assert {w.name for w in WORKFLOWS} == {"test.yml", "book.yml"}


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_schema(workflow):
    out = subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(workflow)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_zizmor_offline_has_no_high_findings():
    out = subprocess.run(
        [str(BIN / "zizmor"), "--offline", "--format", "json", str(ROOT / ".github" / "workflows")],
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip(), out.stderr
    findings = json.loads(out.stdout)
    high = [f for f in findings if f.get("determinations", {}).get("severity", "").lower() == "high"]
    assert not high, json.dumps(high, indent=1)[:3000]


def test_workflows_call_the_make_targets():
    assert "make test" in (ROOT / ".github/workflows/test.yml").read_text()
    assert "make book" in (ROOT / ".github/workflows/book.yml").read_text()
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_book_cache_is_restored_only_for_the_same_package_source():
    """A restored cache must come from a build of the same fedbandit/ and data/: the key's
    first part hashes them and restore-keys may only relax the chapters' part."""
    import yaml

    book = yaml.safe_load((ROOT / ".github/workflows/book.yml").read_text())
    steps = [s for s in book["jobs"]["build"]["steps"] if "actions/cache" in s.get("uses", "")]
    assert len(steps) == 1
    cache = steps[0]["with"]
    package_part = "${{ hashFiles('fedbandit/**', 'data/**', 'pyproject.toml') }}"
    assert cache["key"].startswith(f"book-cache-{package_part}-")
    assert cache["restore-keys"].strip() == f"book-cache-{package_part}-"
    assert "fedbandit.book.execution_cache" in (ROOT / "Makefile").read_text()
