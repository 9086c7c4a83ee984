"""Shared measurement helpers for the benchmark modules: timings (wall and CPU), the
machine's description and load, and the machine's measured peaks that the compute floors
of the hot paths are stated against.

A *compute floor* is the time the work of a kernel would take if it ran at this machine's
measured peak for that kind of work: its floating-point operations at the peak of a
single-threaded float64 matrix product, the bytes it must read and write at the bandwidth
of an in-cache memory copy, the random bits it must consume at the rate of numpy's PCG64
generator, the normal draws at numpy's standard-normal rate, the keystream it must expand
at AES-256-CTR's rate.  Several resources: the floor is the largest (a true lower bound if
the kernel overlapped them perfectly).  ``fraction`` = floor / the kernel's measured CPU
time (1 = at the floor; CPU time, because other processes' load inflates the wall time).
"""

from __future__ import annotations

import math
import os
import platform
import resource
import sys
import time
import tracemalloc
from dataclasses import dataclass

import numpy as np

from fedbandit.book.execution_cache import cpu_model


def timed(func, *, repeat: int = 3):
    """Best wall time of ``repeat`` calls of ``func()`` and the peak traced memory (MB)
    of one call (numpy allocations are traced by tracemalloc)."""
    t = measure(func, repeat=repeat)
    return t.wall, t.peak_mb


@dataclass
class Timing:
    """Best wall time and best CPU time (``time.process_time``, this process) over the
    repeats, and the peak traced memory of one extra call (MB; NaN when not traced)."""

    wall: float
    cpu: float
    peak_mb: float

    def as_dict(self) -> dict:
        return {"wall_s": self.wall, "cpu_s": self.cpu, "peak_mem_mb": self.peak_mb}


def measure(func, *, repeat: int = 3, trace_memory: bool = True) -> Timing:
    """Run ``func()`` ``repeat`` times; best wall and best CPU time, then one traced call.

    Under load from other processes the wall time includes waiting for a core; the CPU
    time does not, so it is the steadier number on a shared machine.
    """
    wall = cpu = math.inf
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        func()
        wall = min(wall, time.perf_counter() - w0)
        cpu = min(cpu, time.process_time() - c0)
    peak = math.nan
    if trace_memory:
        tracemalloc.start()
        try:
            func()
            peak = tracemalloc.get_traced_memory()[1] / 2**20
        finally:
            tracemalloc.stop()
    return Timing(wall, cpu, peak)


def max_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ----------------------------------------------------------------------------- machine


def _cpu_details() -> dict:
    """Vendor, family/model/stepping and the vector extensions of CPU 0 (a virtual machine may
    report only a brand such as "AMD EPYC": these numbers then tell the generation), and the
    SIMD levels numpy dispatches to."""
    out = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    break  # CPU 0 only
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key in ("vendor_id", "cpu family", "model", "stepping", "cpu MHz"):
                    out[key.replace(" ", "_")] = value
                elif key == "flags":
                    flags = set(value.split())
                    out["vector_extensions"] = [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512dq",
                                                            "avx512vl", "avx512_bf16", "amx_tile") if f in flags]
    except OSError:
        pass
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

        out["numpy_simd"] = [name for name in __cpu_dispatch__ if __cpu_features__.get(name)]
    except ImportError:  # pragma: no cover - numpy internals moved
        pass
    return out


def _cache_sizes() -> dict:
    out = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(base)):
            if not entry.startswith("index"):
                continue
            path = os.path.join(base, entry)
            with open(os.path.join(path, "level")) as f:
                level = f.read().strip()
            with open(os.path.join(path, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(path, "size")) as f:
                size = f.read().strip()
            if kind != "Instruction":
                out[f"L{level}"] = size
    except OSError:
        pass
    return out


def _memory_gb() -> float:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return math.nan


def _blas() -> dict:
    try:
        from threadpoolctl import threadpool_info

        for info in threadpool_info():
            if info.get("user_api") == "blas":
                return {"library": info.get("internal_api"), "version": info.get("version"),
                        "architecture": info.get("architecture"), "threads": info.get("num_threads")}
    except Exception:  # pragma: no cover - threadpoolctl is a dependency, but be robust
        pass
    return {}


def machine_info() -> dict:
    """What the results were measured on."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    return {
        "cpu": cpu_model(),
        "cpu_details": _cpu_details(),
        "logical_cpus": os.cpu_count(),
        "cpus_available": affinity,
        "caches": _cache_sizes(),
        "memory_gb": round(_memory_gb(), 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "blas": _blas(),
    }


# ------------------------------------------------------------------------------- peaks


def _best(func, repeat: int) -> float:
    """Best CPU time of this thread (the peaks are single-threaded; on a loaded machine the
    wall time would include waiting for a core and understate the peak)."""
    best = math.inf
    for _ in range(repeat):
        t0 = time.thread_time()
        func()
        best = min(best, time.thread_time() - t0)
    return best


def machine_peaks(repeat: int = 5) -> dict:
    """This machine's measured peaks, single-threaded (best CPU time of ``repeat``; each a rate).

    Sizes are chosen to run in cache (the highest rate the hardware reaches for that work,
    so that amount / peak is a lower bound on any kernel's time):

    * ``flops_per_s``: float64 matrix product ``(1024, 1024) @ (1024, 1024)`` (2n³ flops),
      BLAS limited to one thread;
    * ``copy_bytes_per_s``: ``np.copyto`` of 512 KiB, 32 times (bytes read + bytes written);
      ``copy_dram_bytes_per_s``: the same for 64 MiB (main memory; for information);
    * ``random_bits_per_s``: PCG64 raw 64-bit words (``bit_generator.random_raw``), 2^16 a call;
    * ``normals_per_s``: ``Generator.standard_normal`` into a preallocated array of 2^16;
    * ``sqrt_per_s``: float64 square roots (``np.sqrt`` of 2^14 values into a preallocated array);
    * ``aes_ctr_bytes_per_s``: AES-256-CTR keystream (``cryptography``), 128 KiB a call as
      secure aggregation expands its masks, 256 calls;
    * ``x25519_per_s``: X25519 key agreements (``cryptography``).
    """
    from threadpoolctl import threadpool_limits

    peaks = {}
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(1024, 1024)), rng.normal(size=(1024, 1024))
    c = np.empty((1024, 1024))
    with threadpool_limits(limits=1, user_api="blas"):
        np.matmul(a, b, out=c)
        peaks["flops_per_s"] = 2 * 1024**3 / _best(lambda: np.matmul(a, b, out=c), repeat)
    small, small_out = np.ones(2**16), np.empty(2**16)  # 512 KiB each

    def copies():
        for _ in range(32):
            np.copyto(small_out, small)

    copies()
    peaks["copy_bytes_per_s"] = 32 * 2 * small.nbytes / _best(copies, repeat)
    src = np.ones(2**23)  # 64 MiB
    dst = np.empty_like(src)
    np.copyto(dst, src)
    peaks["copy_dram_bytes_per_s"] = 2 * src.nbytes / _best(lambda: np.copyto(dst, src), repeat)
    n = 2**16
    bg = np.random.PCG64(0)

    def raw():
        for _ in range(64):
            bg.random_raw(n)  # each result dropped at once: the allocator reuses the block

    peaks["random_bits_per_s"] = 64 * 64 * n / _best(raw, repeat)
    out = np.empty(n)

    def normals():
        for _ in range(16):
            rng.standard_normal(out=out)

    peaks["normals_per_s"] = 16 * n / _best(normals, repeat)
    roots_in, roots_out = rng.random(2**14), np.empty(2**14)  # 128 KiB each: in cache

    def roots():
        for _ in range(64):
            np.sqrt(roots_in, out=roots_out)

    peaks["sqrt_per_s"] = 64 * 2**14 / _best(roots, repeat)
    try:
        from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        chunk = bytes(2**17)
        enc = Cipher(algorithms.AES(bytes(32)), modes.CTR(bytes(16))).encryptor()

        def keystream():
            for _ in range(256):
                enc.update(chunk)

        peaks["aes_ctr_bytes_per_s"] = 256 * len(chunk) / _best(keystream, repeat)
        sk, pk = X25519PrivateKey.generate(), X25519PrivateKey.generate().public_key()

        def agreements():
            for _ in range(500):
                sk.exchange(pk)

        peaks["x25519_per_s"] = 500 / _best(agreements, repeat)
    except ImportError:  # pragma: no cover - cryptography is a dependency
        peaks["aes_ctr_bytes_per_s"] = peaks["x25519_per_s"] = math.nan
    return peaks


_PEAKS: dict | None = None


def peaks() -> dict:
    """The machine's peaks, measured once per process (:func:`machine_peaks`)."""
    global _PEAKS
    if _PEAKS is None:
        _PEAKS = machine_peaks()
    return _PEAKS


PEAK_LABELS = {
    "flops_per_s": "float64 flops (1-thread matrix product)",
    "copy_bytes_per_s": "in-cache copy bandwidth (bytes read + written)",
    "copy_dram_bytes_per_s": "main-memory copy bandwidth (bytes read + written)",
    "random_bits_per_s": "PCG64 random bits",
    "normals_per_s": "standard normal draws",
    "sqrt_per_s": "float64 square roots (numpy)",
    "aes_ctr_bytes_per_s": "AES-256-CTR keystream bytes",
    "x25519_per_s": "X25519 key agreements",
}


def floor(work: str, amounts: dict, seconds: float, *, serial: tuple = ()) -> dict:
    """A row's compute floor.

    ``amounts`` maps a key of :func:`peaks` to the amount of that resource the work needs
    (flops, bytes, bits, draws, ...).  Each amount / peak is a time; resources that could
    overlap count by the largest, those in ``serial`` (work of one core that cannot overlap,
    e.g. AES and X25519 on one core) are added first.  ``fraction`` = floor / ``seconds`` (the kernel's CPU time).
    """
    pk = peaks()
    parts = {key: amount / pk[key] for key, amount in amounts.items()}
    if serial:
        parts = {**{k: v for k, v in parts.items() if k not in serial},
                 "+".join(serial): sum(parts[k] for k in serial)}
    binding = max(parts, key=parts.get)
    floor_s = parts[binding]
    return {
        "work": work,
        "amounts": amounts,
        "floor_s": floor_s,
        "binding": binding,
        "fraction": floor_s / seconds,
    }


def peer_version(dist: str) -> str | None:
    """Installed version of distribution ``dist``, or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None
