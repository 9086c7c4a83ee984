"""Run every benchmark module (benchmarks/bench_*.py) and write a results table.

Each module exposes ``benchmarks() -> list[dict]``; each dict has ``name``, ``value``,
``unit``, ``peak_mem_mb`` and ``notes``.  Results go to
``benchmarks/results/results.json`` and ``benchmarks/results/results.md``.  Run with
``make bench`` (optionally ``make bench BENCH=tree`` for one module).

Speed is measured here and only here: the test suite never asserts on timings.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("only", nargs="*", help="module names without bench_ (default: all)")
    parser.add_argument("--out", default=str(HERE / "results"))
    args = parser.parse_args(argv)
    paths = sorted(HERE.glob("bench_*.py"))
    if args.only:
        paths = [p for p in paths if p.stem.removeprefix("bench_") in args.only]
        if not paths:
            parser.error(f"no benchmark module matches {args.only}")
    rows, failures = [], []
    for path in paths:
        print(f"== {path.stem}", flush=True)
        start = time.perf_counter()
        try:
            results = _load(path).benchmarks()
        except Exception:  # report and go on: one broken module must not hide the others
            traceback.print_exc()
            failures.append(path.stem)
            continue
        for row in results:
            row = {"module": path.stem, **row}
            rows.append(row)
            print(f"   {row['name']}: {row['value']:.4g} {row['unit']}  (peak {row.get('peak_mem_mb', float('nan')):.0f} MB)")
        print(f"   [{time.perf_counter() - start:.1f} s]")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"python": sys.version.split()[0], "machine": platform.machine(), "processor": platform.processor()}
    (out / "results.json").write_text(json.dumps({"meta": meta, "results": rows}, indent=1))
    lines = ["| module | benchmark | value | unit | peak memory (MB) | notes |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['module']} | {r['name']} | {r['value']:.4g} | {r['unit']} | {r.get('peak_mem_mb', float('nan')):.0f} | {r.get('notes', '')} |"
        )
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'results.md'} and results.json")
    if failures:
        print(f"benchmark modules that failed: {failures}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
