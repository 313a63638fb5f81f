"""Peak memory and time of packaging a large LoRA adapter: the streamed packager against the
in-memory one lmikit used before (every file read into memory, the tar and the gzip built in
memory), each in its own process so its peak RSS is its own.

    python benchmarks/adapter_packaging.py [--mb 500] [--keep DIR]

The adapter is synthetic: a valid adapter_config.json and adapter_model.safetensors for
Qwen2.5-7B-Instruct (all seven linear modules, 28 layers) whose weight bytes are random, so
gzip cannot shrink them (as with real weights). Prints one JSON line per packager and the
ratio; both must produce the same sha256.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def make_adapter(folder: Path, megabytes: int) -> Path:
    """An adapter of about ``megabytes`` MB (the rank is chosen to reach the size), written a
    piece at a time so that this process stays small."""
    from lmikit.testing import write_lora_adapter
    from lmikit.testing._adapters import lora_tensors, safetensors_header

    per_rank = sum(2 * shape[0] * shape[1] for _, shape in lora_tensors(
        rank=1, target_modules=MODULES, layers=range(28)).values())
    rank = max(1, megabytes * 10**6 // per_rank)
    path = write_lora_adapter(folder, rank=rank, target_modules=MODULES, layers=[0])
    head, left = safetensors_header(lora_tensors(rank=rank, target_modules=MODULES,
                                                 layers=range(28)))
    with (path / "adapter_model.safetensors").open("wb") as handle:
        handle.write(head)
        while left:
            piece = os.urandom(min(left, 1 << 24))
            handle.write(piece)
            left -= len(piece)
    return path


def peak_rss_kib() -> int:
    """This process's peak RSS. /proc's VmHWM starts afresh at exec; ru_maxrss keeps the
    parent's peak from before the exec, so it is the fallback only."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def in_memory(path: Path) -> str:
    """The packager before streaming: every file in memory, then the tar, then the gzip."""
    files = {p.relative_to(path).as_posix(): p.read_bytes()
             for p in sorted(path.rglob("*")) if p.is_file()}
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(files[name]), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(files[name]))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=6) as gz:
        gz.write(raw.getvalue())
    return hashlib.sha256(out.getvalue()).hexdigest()


def streamed(path: Path) -> str:
    from lmikit.lora import package_adapter

    package = package_adapter(path, model_id="Qwen/Qwen2.5-7B-Instruct", max_rank=512)
    digest = package.sha256
    package.close()
    return digest


def child(mode: str, path: Path) -> None:
    import lmikit.lora._packaging  # noqa: F401  (imports are not what is measured)

    base = peak_rss_kib()
    start = time.perf_counter()
    digest = (streamed if mode == "streamed" else in_memory)(path)
    seconds = time.perf_counter() - start
    peak = peak_rss_kib()  # KiB
    print(json.dumps({"packager": mode, "seconds": round(seconds, 2),
                      "peak_rss_mb": round(peak / 1024, 1),
                      "rss_growth_mb": round((peak - base) / 1024, 1), "sha256": digest}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=int, default=500, help="adapter size in MB")
    ap.add_argument("--keep", type=Path, help="write the adapter here and keep it")
    ap.add_argument("--child", choices=["streamed", "in-memory"], help=argparse.SUPPRESS)
    ap.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.path)
        return 0
    with tempfile.TemporaryDirectory(prefix="lmikit-bench-") as tmp:
        folder = args.keep or Path(tmp) / "adapter"
        path = make_adapter(folder, args.mb)
        size = sum(p.stat().st_size for p in path.iterdir())
        print(json.dumps({"adapter_mb": round(size / 1e6, 1), "path": str(path)}))
        results = {}
        for mode in ("in-memory", "streamed"):
            out = subprocess.run([sys.executable, __file__, "--child", mode, "--path", str(path)],
                                 capture_output=True, text=True, check=True)
            print(out.stdout.strip())
            results[mode] = json.loads(out.stdout)
        before, after = results["in-memory"], results["streamed"]
        assert before["sha256"] == after["sha256"], "the packagers disagree"
        print(json.dumps({"rss_growth_ratio": round(after["rss_growth_mb"]
                                                    / max(before["rss_growth_mb"], 0.1), 3),
                          "time_ratio": round(after["seconds"] / before["seconds"], 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
