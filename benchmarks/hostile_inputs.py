"""Time and peak memory of hostile inputs (target: each under 1 s and 100 MB).

Each case runs in a fresh interpreter so its peak resident memory (ru_maxrss) is its own;
the time is that of the load/plan call alone, imports excluded. Memory is reported twice:
the process's peak resident memory (imports included; the first row is the floor of a child
that only imports lmikit) and the peak Python allocation during the call (tracemalloc). Every
case must end in an lmikit error, or in a plan for the large but valid config.

- alias bomb: the "billion laughs" YAML (9 ** 9 values in a few hundred bytes);
- deep nesting: 10,000 nested ``[`` as a spec value;
- huge integer: a 5,000-digit number as a spec value;
- specs just under MAX_SPEC_BYTES (one long string, comments) and one past MAX_SPEC_NODES;
- FIFO and /dev/zero named as the spec (must neither wait nor read forever);
- oversized spec: a file one byte over MAX_SPEC_BYTES;
- large config.json: a valid config padded to just under MAX_CONFIG_BYTES with the kind of
  bulk real files carry (quantization module lists), then planned;
- deep config.json: 100,000 nested ``[``.

    python benchmarks/hostile_inputs.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 1.0
TARGET_MB = 100.0

CHILD = textwrap.dedent("""
    import json, resource, sys, time, tracemalloc
    # imports are not what is measured
    import lmikit.accept._accept, lmikit.spec._loader, lmikit.planner._planner
    from lmikit.errors import LmikitError
    kind, arg = sys.argv[1], sys.argv[2]

    def call():
        try:
            if kind == "spec":
                lmikit.spec._loader.load_spec(arg)
                return "loaded"
            if kind == "config":
                p = lmikit.planner._planner.plan("acme/model", "ml.p4de.24xlarge", config_path=arg)
                return f"planned (kv {p.kv_bytes_per_token} B/token)"
            return "imports only"
        except LmikitError as exc:
            return f"{exc.kind}: {str(exc).splitlines()[-1].strip().removeprefix('- ')[:64]}"

    start = time.perf_counter()
    outcome = call()
    took = time.perf_counter() - start
    tracemalloc.start()  # a second run, traced, for the call's own allocations
    call()
    allocated = tracemalloc.get_traced_memory()[1]
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"s": took, "mb": peak_kb / 1024, "alloc": allocated / 2**20,
                      "outcome": outcome}))
""")


def billion_laughs() -> str:
    lines = ["api_version: v1", 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    return "\n".join(lines) + "\n"


def cases(folder: Path) -> dict[str, tuple[str, str]]:
    from lmikit.catalog import MAX_CONFIG_BYTES
    from lmikit.spec import MAX_SPEC_BYTES

    spec = (ROOT / "examples" / "docqa-qwen7b.yaml").read_text()
    out: dict[str, tuple[str, str]] = {"imports only (floor)": ("none", "-")}

    def write(name: str, text: str) -> str:
        (folder / name).write_text(text)
        return str(folder / name)

    out["alias bomb"] = ("spec", write("bomb.yaml", billion_laughs()))
    out["deep nesting (10,000 [)"] = ("spec", write("deep.yaml", spec.replace(
        "name: docqa-qwen7b", "name: " + "[" * 10_000)))
    out["huge integer (5,000 digits)"] = ("spec", write("int.yaml", spec.replace(
        "max_count: 2", "max_count: " + "9" * 5000)))
    room = MAX_SPEC_BYTES - len(spec) - 100
    out["spec at the limit: one string"] = ("spec", write("long.yaml", spec.replace(
        "name: docqa-qwen7b", "name: " + "x" * room)))
    out["spec at the limit: comments"] = ("spec", write("comments.yaml", spec + (
        "# " + "c" * 98 + "\n") * (room // 101)))
    pairs = "".join(f"  k{i}: v\n" for i in range(6000))
    out["spec of 12,000 values (tags)"] = ("spec", write("values.yaml", spec.replace(
        "tags:\n  team: ml-platform\n", "tags:\n" + pairs)))
    fifo = folder / "fifo.yaml"
    os.mkfifo(fifo)
    out["FIFO as the spec"] = ("spec", str(fifo))
    if Path("/dev/zero").exists():
        out["/dev/zero as the spec"] = ("spec", "/dev/zero")
    big = folder / "big.yaml"
    with big.open("wb") as f:
        f.truncate(MAX_SPEC_BYTES + 1)
    out["spec over the size limit"] = ("spec", str(big))
    config = json.loads((ROOT / "examples" / "models" / "llama-3.1-8b-config.json").read_text())
    names = [f"model.layers.{i}.mlp.experts.{j}.gate_proj" for i in range(200)
             for j in range(1000)]
    config["quantization_config"] = {"quant_method": "fp8", "ignore": []}
    room = MAX_CONFIG_BYTES - len(json.dumps(config)) - 1000
    ignore = config["quantization_config"]["ignore"]
    used = 0
    for name in names:
        if used + len(name) + 4 > room:
            break
        ignore.append(name)
        used += len(name) + 4
    text = json.dumps(config)
    out[f"large config.json ({len(text) / 1e6:.1f} MB)"] = ("config", write("large.json", text))
    out["deep config.json (100,000 [)"] = ("config", write("deep.json", "[" * 100_000))
    return out


def main() -> int:
    ok = True
    print(f"{'case':30s} {'seconds':>8s} {'peak RSS MB':>12s} {'call MB':>8s}  outcome")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (kind, arg) in cases(Path(tmp)).items():
            try:
                run = subprocess.run([sys.executable, "-c", CHILD, kind, arg], cwd=ROOT,
                                     capture_output=True, text=True, timeout=30)
                result = json.loads(run.stdout) if run.returncode == 0 else {
                    "s": float("nan"), "mb": float("nan"), "alloc": float("nan"),
                    "outcome": f"CRASHED: {run.stderr.strip().splitlines()[-1][:60]}"}
            except subprocess.TimeoutExpired:
                result = {"s": 30.0, "mb": float("nan"), "alloc": float("nan"),
                          "outcome": "HUNG (killed at 30 s)"}
            slow = not (result["s"] < TARGET_S and result["mb"] < TARGET_MB)
            ok &= not slow
            print(f"{name:30s} {result['s']:8.3f} {result['mb']:12.1f} {result['alloc']:8.2f}"
                  f"  {result['outcome']}" + ("  OVER TARGET" if slow else ""))
    print(f"targets: each under {TARGET_S} s and {TARGET_MB} MB peak resident memory")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
