"""The committed benchmark results back the book's performance page.

``benchmarks/results/results.json`` is written by ``make bench`` and read by
``chapters/performance.ipynb`` when the book is built.  These tests fail on a stale or
broken file (old schema, a row the page shows gone missing, a peer ratio without the
peer's version, a floor without its work), so the failure shows here and not as a build
error; and they check that the page quotes only rows that the schema requires.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import results_schema as schema  # noqa: E402

PAGE = ROOT / "chapters" / "performance.ipynb"


@pytest.fixture(scope="module")
def results() -> dict:
    assert schema.RESULTS.exists(), "benchmarks/results/results.json is missing: run `make bench` and commit it"
    return schema.load()


def test_results_file_parses_and_backs_every_row_of_the_page(results):
    assert schema.problems(results) == []


def test_results_file_is_strict_json():
    json.loads(schema.RESULTS.read_text(encoding="utf-8"), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))


def test_markdown_table_lists_every_page_row(results):
    md = (schema.RESULTS.parent / "results.md").read_text(encoding="utf-8")
    assert results["generated"] in md
    missing = [rid for rid in schema.PAGE_ROWS if f"| {rid} |" not in md]
    assert not missing, f"results.md lacks {missing}: it is not from the same run as results.json"


def test_every_peer_row_has_each_named_peer_measured_or_explained(results):
    rows = schema.rows_by_id(results)
    expected = {"dgauss": {"OpenDP"}, "secagg": {"Flower"}, "zcdp": {"dp-accounting"}, "rdp": {"dp-accounting"},
                "wht": {"fht-cpu", "FFHT"}}
    for rid in schema.PEER_ROWS:
        named = {p["package"] for p in rows[rid]["peers"]}
        assert expected[rid.split("_")[0]] <= named, (rid, named)


def _broken(results, edit):
    bad = copy.deepcopy(results)
    edit(bad)
    return schema.problems(bad)


@pytest.mark.parametrize("what, edit", [
    ("old schema", lambda r: r.update(schema=1)),
    ("a page row missing", lambda r: r.update(results=[x for x in r["results"] if x["id"] != "wht_dme"])),
    ("a duplicated row", lambda r: r["results"].append(copy.deepcopy(r["results"][0]))),
    ("no load at the end", lambda r: r["load"].pop("end")),
    ("a peak missing", lambda r: r["peaks"].pop("flops_per_s")),
    ("a value that is null", lambda r: next(x for x in r["results"] if x["id"] == "zcdp_to_dp").update(value=None)),
    ("a floor without its work",
     lambda r: next(x for x in r["results"] if x["id"] == "tree_silo_ldp_d10")["floor"].pop("work")),
    ("a measured peer without its version",
     lambda r: next(x for x in r["results"] if x["id"] == "dgauss_sigma10")["peers"][0].update(
         status="measured", version=None, wall_s=1.0, cpu_s=1.0, ratio_wall=2.0, ratio_cpu=2.0)),
    ("an unavailable peer without a reason",
     lambda r: next(x for x in r["results"] if x["id"] == "secagg_n30_d65536")["peers"][0].update(
         status="not available", reason=None)),
    ("a peer row with no peer", lambda r: next(x for x in r["results"] if x["id"] == "rdp_to_dp").update(peers=[])),
    ("a floor above the measured time (not a lower bound)",
     lambda r: next(x for x in r["results"] if x["id"] == "wht_dme")["floor"].update(fraction=2.0)),
    ("a same-workload ratio without its CPU ratio",
     lambda r: next(x for x in r["results"] if x["id"] == "dp20_same_workload_speedup").pop("ratio_cpu")),
])
def test_problems_catches_a_broken_file(results, what, edit):
    assert _broken(results, edit), f"problems() did not catch {what}"


def test_page_quotes_only_rows_the_schema_requires():
    """Every row id the page's code names is in PAGE_ROWS (so the tests above guard it)."""
    nb = nbformat.read(PAGE, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    named = set(re.findall(r'"((?:dgauss|secagg|zcdp|rdp|wht|tree|fixed_batch|dp20|consensus)_[a-z0-9_]+)"', code))
    glue_keys = set(re.findall(r'glue_(?:text|number|ratio)\(\s*"([^"]+)"', code))
    named -= glue_keys | {"wht_", "dgauss_"}
    assert named, "the page names no rows: has it changed how it reads the file?"
    assert named <= set(schema.PAGE_ROWS), f"the page shows rows the schema does not require: {named - set(schema.PAGE_ROWS)}"
    assert "schema.problems(RESULTS)" in code, "the page must refuse a results file that fails the schema"
