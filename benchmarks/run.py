"""Run the benchmark modules (benchmarks/bench_*.py) and write the results the book shows.

Each module exposes ``benchmarks() -> list[dict]`` (``benchmarks(long=...)`` if it has
minutes-long rows); each dict has ``name``, ``value``, ``unit`` and ``notes``, and usually
``id``, ``wall_s``, ``cpu_s``, ``peak_mem_mb``, a compute ``floor`` and ``peers``.
Results go to ``benchmarks/results/results.json`` (read by the performance page,
``chapters/performance.ipynb``; schema in ``results_schema.py``) and ``results.md``, with the
machine, its load averages at the start and end of each module, and the machine's
measured peaks (at the start and at the end of the run) that the floors are stated
against.  Run with ``make bench`` (``make bench BENCH="hotpaths tree"`` for some modules,
``BENCH_ARGS=--long`` for the paper-scale chapter runs too, which take many minutes).

Speed is measured here and only here: the test suite never asserts on timings.  The
machine is shared by whatever else runs on it: the load averages say how busy it was; the
CPU times (``time.process_time``) are the steadier numbers under load.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import inspect
import json
import math
import os
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

# One thread per BLAS call, as in the chapters' worker processes: rows measure one core.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import _measure  # noqa: E402
from fedbandit.book.execution_cache import load_average  # noqa: E402
from results_schema import PEER_PACKAGES, SCHEMA  # noqa: E402

FIRST = ("hotpaths",)  # the page's rows first, while the machine's state is closest to the peaks'


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def _commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE.parent, capture_output=True,
                             text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=HERE.parent,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+changes" if dirty else "") if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _clean(x):
    """JSON without NaN (null instead), so any JSON reader accepts the file."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "item") and callable(x.item):  # numpy scalar
        return _clean(x.item())
    return x


def _fmt(v) -> str:
    return "—" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.4g}"


def _markdown(doc: dict) -> str:
    m, load = doc["machine"], doc["load"]
    lines = [
        f"# Benchmarks ({doc['generated']}, commit {doc.get('commit')})",
        "",
        f"Machine: {m['cpu']}, {m['cpus_available']} of {m['logical_cpus']} logical CPUs, {m['memory_gb']} GB, "
        f"Python {m['python']}, numpy {m['numpy']}; load average (1/5/15 min) {load['start']} at the start, "
        f"{load['end']} at the end.  Peers: "
        + ", ".join(f"{k} {v or 'not installed'}" for k, v in doc["peers"].items()) + ".",
        "",
        "| module | id | benchmark | value | unit | wall s | CPU s | floor | peers (peer time / fedbandit time, CPU) | notes |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["results"]:
        fl = r.get("floor")
        floor_txt = f"{100 * fl['fraction']:.3g} % of floor ({fl['binding']})" if fl else "—"
        peers = "; ".join(
            f"{p['package']} {p.get('version')}: {_fmt(p.get('ratio_cpu'))}x" if p["status"] == "measured"
            else f"{p['package']}: not available" for p in r.get("peers") or [])
        lines.append(f"| {r['module']} | {r['id']} | {r['name']} | {_fmt(r['value'])} | {r['unit']} | "
                     f"{_fmt(r.get('wall_s'))} | {_fmt(r.get('cpu_s'))} | {floor_txt} | {peers or '—'} | "
                     f"{r.get('notes', '')} |")
    if doc["failures"]:
        lines += ["", f"Modules that failed: {', '.join(doc['failures'])}"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("only", nargs="*", help="module names without bench_ (default: all but the long-only ones)")
    parser.add_argument("--long", action="store_true", help="also the paper-scale chapter runs (many minutes)")
    parser.add_argument("--out", default=str(HERE / "results"))
    args = parser.parse_args(argv)
    paths = sorted(HERE.glob("bench_*.py"), key=lambda p: (p.stem.removeprefix("bench_") not in FIRST, p.stem))
    if args.only:
        paths = [p for p in paths if p.stem.removeprefix("bench_") in args.only]
        if not paths:
            parser.error(f"no benchmark module matches {args.only}")
    started = time.perf_counter()
    load_start = load_average()
    print(f"load average {load_start}; measuring the machine's peaks", flush=True)
    peaks_start = _measure.peaks()
    rows, failures, modules = [], [], {}
    for path in paths:
        module = _load(path)
        if getattr(module, "LONG_ONLY", False) and not args.long and not args.only:
            print(f"== {path.stem}: skipped (long; run with --long)", flush=True)
            continue
        print(f"== {path.stem}", flush=True)
        info = {"load_start": load_average()}
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            kwargs = {"long": args.long} if "long" in inspect.signature(module.benchmarks).parameters else {}
            results = module.benchmarks(**kwargs)
        except Exception:  # report and go on: one broken module must not hide the others
            traceback.print_exc()
            failures.append(path.stem)
            continue
        finally:
            info.update(wall_s=time.perf_counter() - w0, cpu_s=time.process_time() - c0,
                        load_end=load_average())
            modules[path.stem] = info
        for row in results:
            short, slug = path.stem.removeprefix("bench_"), _slug(row["name"])
            rid = row.get("id") or (slug if slug.startswith(short + "_") else f"{short}_{slug}")
            row = {"module": path.stem, **row, "id": rid}
            row.setdefault("peers", [])
            rows.append(row)
            fl = row.get("floor")
            extra = f", {100 * fl['fraction']:.3g} % of floor" if fl else ""
            print(f"   {row['id']}: {row['value']:.4g} {row['unit']}{extra}", flush=True)
        print(f"   [{info['wall_s']:.1f} s wall, {info['cpu_s']:.1f} s CPU, load {info['load_end']}]", flush=True)
    peaks_end = _measure.machine_peaks()
    doc = {
        "schema": SCHEMA,
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _commit(),
        "command": "python benchmarks/run.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "duration_s": time.perf_counter() - started,
        "machine": _measure.machine_info(),
        "load": {"start": load_start, "end": load_average(), "modules": modules},
        "peaks": peaks_start,
        "peaks_end": peaks_end,
        "peak_labels": _measure.PEAK_LABELS,
        "peers": {pkg: _measure.peer_version(pkg) for pkg in PEER_PACKAGES},
        "results": rows,
        "failures": failures,
    }
    doc = _clean(doc)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "results.md").write_text(_markdown(doc), encoding="utf-8")
    print(f"wrote {out / 'results.md'} and results.json in {doc['duration_s']:.0f} s", flush=True)
    if failures:
        print(f"benchmark modules that failed: {failures}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
