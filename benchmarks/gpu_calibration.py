"""GPU calibration: prefill time per token, decode weight reads and pinned host<->GPU copies,
measured.

What it measures, and how to run it: docs/planner-model.md,
"What benchmarks/gpu_calibration.py measures".
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import itertools
import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lmikit.catalog import catalog_entry, get_model
from lmikit.sim import (
    KERNELS,
    LAYOUTS,
    LMCACHE_CHUNK_TOKENS,
    CopyPoint,
    DecodePoint,
    GpuCalibration,
    Hardware,
    PrefillPoint,
    SuffixPoint,
    catalog_gpu_for,
    copy_gbps,
    from_dict,
    kv_chunk_bytes,
)

DEFAULT_MODELS = ("Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen3-8B")
DEFAULT_TOKENS = (1024, 4096, 16384)
COPY_CHUNKS = (1, 40)
DEFAULT_BATCHES = (1, 32)  # decode: one sequence, and a batch still far from compute-bound
DEFAULT_SUFFIXES = (256, 2048)  # a question after a cached document; a long new turn
# catalog model types that transformers' AutoModelForCausalLM builds as dense decoders
BUILDABLE = {"qwen2", "qwen3", "llama", "mistral"}


def plan(models: Sequence[str], tokens: Sequence[int], gpu_memory_gib: float
         ) -> list[tuple[str, list[int]]]:
    """The (model, prompt lengths) to measure: models whose bf16 weights and the largest
    pass's activations fit in 80% of the GPU's memory, each with its lengths that fit.

    Refuses a model the script cannot build (not dense, or a type transformers is not asked
    for here), naming what it can.

    >>> plan(["Qwen/Qwen2.5-1.5B-Instruct"], [1024, 4096], 80.0)
    [('Qwen/Qwen2.5-1.5B-Instruct', [1024, 4096])]
    """
    out = []
    for model_id in models:
        config = catalog_entry(model_id)["config"]
        if config.get("model_type") not in BUILDABLE:
            raise SystemExit(f"--models: {model_id!r} has model_type "
                             f"{config.get('model_type')!r}; this script builds "
                             f"{', '.join(sorted(BUILDABLE))} models")
        geo = get_model(model_id)
        room = 0.8 * gpu_memory_gib * 2**30 - geo.weight_bytes_for("bfloat16")
        # per token in flight: the residual stream, the MLP's widest activation and the
        # KV the pass writes, a few times over for what PyTorch keeps while it runs
        per_token = 8 * 2 * (config["hidden_size"] + config["intermediate_size"]) \
            + geo.kv_bytes_per_token(2)
        fits = [n for n in tokens if n * per_token <= room]
        if fits:
            out.append((model_id, fits))
    return out


def median_seconds(fn: Callable[[], None], sync: Callable[[], None], repeats: int) -> float:
    """Two untimed calls, then the median wall time of ``repeats`` synchronized calls."""
    for _ in range(2):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def build_model(model_id: str, device: str) -> Any:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = dict(catalog_entry(model_id)["config"])
    model_type = config.pop("model_type")
    for key in ("architectures", "torch_dtype", "dtype", "transformers_version"):
        config.pop(key, None)
    cfg = AutoConfig.for_model(model_type, **config)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16,
                                                 attn_implementation="sdpa")
    return model.eval()


def measure_model(model_id: str, lengths: Sequence[int], batches: Sequence[int],
                  layouts: Sequence[str], device: str, repeats: int, sync: Callable[[], None]
                  ) -> tuple[list[PrefillPoint], list[DecodePoint]]:
    model = build_model(model_id, device)
    prefill = measure_prefill(model, model_id, lengths, device, repeats, sync)
    decode = measure_decode(model, model_id, batches, layouts, device, repeats, sync)
    return prefill, decode


def measure_prefill(model: Any, model_id: str, lengths: Sequence[int], device: str,
                    repeats: int, sync: Callable[[], None]) -> list[PrefillPoint]:
    import torch

    vocab = model.config.vocab_size
    points = []
    for n in lengths:
        ids = torch.randint(0, vocab, (1, n), device=device)

        def one(ids: Any = ids, model: Any = model) -> None:
            with torch.inference_mode():
                model(input_ids=ids, logits_to_keep=1, use_cache=False)

        seconds = median_seconds(one, sync, repeats)
        points.append(PrefillPoint(model_id, n, seconds))
        print(f"  prefill {model_id} {n:>6} tokens: {seconds * 1000:9.2f} ms "
              f"({n / seconds:,.0f} tokens/s)", flush=True)
    return points


# vLLM's packed_modules_mapping for Llama, Qwen2 and Qwen3 (vllm/model_executor/models/
# llama.py, qwen2.py, qwen3.py): the matrices it loads into one, each read as one GEMV
PACKED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


def decode_weights(model: Any, layout: str) -> list[Any]:
    """The weight matrices a decode step multiplies, in ``layout``: ``unfused`` as
    transformers holds them, ``fused`` with each module's q/k/v and gate/up stacked into one
    matrix as vLLM loads them (new tensors; the unfused ones stay in the model)."""
    import torch

    if layout == "unfused":
        return [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    weights, packed = [], set()
    for module in model.modules():
        for names in PACKED:
            parts = [getattr(module, n, None) for n in names]
            if all(isinstance(p, torch.nn.Linear) for p in parts):
                weights.append(torch.cat([p.weight for p in parts], dim=0))
                packed.update(id(p) for p in parts)
    weights += [m.weight for m in model.modules()
                if isinstance(m, torch.nn.Linear) and id(m) not in packed]
    return weights


def measure_decode(model: Any, model_id: str, batches: Sequence[int], layouts: Sequence[str],
                   device: str, repeats: int, sync: Callable[[], None]) -> list[DecodePoint]:
    """Every linear layer's weights applied to ``batch`` tokens, as one decode step reads
    them, in each layout, replayed from a CUDA graph (on the CPU, called directly)."""
    import torch

    points = []
    for layout in layouts:
        weights = decode_weights(model, layout)
        weight_bytes = sum(w.numel() * w.element_size() for w in weights)
        for batch in batches:
            inputs = {width: torch.randn(batch, width, dtype=model.dtype, device=device)
                      for width in {w.shape[1] for w in weights}}  # one per input width

            def step(inputs: dict[int, Any] = inputs, weights: list[Any] = weights) -> None:
                with torch.inference_mode():
                    for w in weights:
                        torch.nn.functional.linear(inputs[w.shape[1]], w)

            run = _graphed(step) if device == "cuda" else step
            seconds = median_seconds(run, sync, repeats)
            points.append(DecodePoint(model_id, batch, weight_bytes, seconds, layout))
            print(f"  decode  {model_id} {layout:7s} batch {batch:>3}: {seconds * 1000:9.3f} "
                  f"ms for {len(weights)} matrices, {weight_bytes / 1e9:.2f} GB "
                  f"({weight_bytes / seconds / 1e9:,.0f} GB/s)", flush=True)
            del inputs, run
        del weights
    return points


def _graphed(fn: Callable[[], None]) -> Callable[[], None]:
    """``fn`` captured once in a CUDA graph (after two warm-up calls off the capture): its
    replay, which costs no kernel launches."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def measure_copies(chunk_bytes: int, repeats: int, sync: Callable[[], None]
                   ) -> list[CopyPoint]:
    import torch

    points = []
    for chunks in COPY_CHUNKS:
        host = [torch.empty(chunk_bytes, dtype=torch.uint8, pin_memory=True)
                for _ in range(chunks)]
        gpu = [torch.empty(chunk_bytes, dtype=torch.uint8, device="cuda")
               for _ in range(chunks)]
        for g in gpu:
            g.fill_(1)
        # LMCache's order: store GPU -> host, then retrieve host -> GPU, so the host pages
        # the retrieve reads were last written by the GPU, as in LMCache's CPU buffer
        for direction, src, dst in (("gpu_to_host", gpu, host), ("host_to_gpu", host, gpu)):
            def move(src: list[Any] = src, dst: list[Any] = dst) -> None:
                for s, d in zip(src, dst, strict=True):
                    d.copy_(s, non_blocking=True)

            seconds = median_seconds(move, sync, repeats)
            point = CopyPoint(direction, chunk_bytes, chunks, seconds)
            points.append(point)
            print(f"  copy {direction:11s} {chunks:>3} x {chunk_bytes / 1e6:7.2f} MB: "
                  f"{copy_gbps(point):6.2f} GB/s", flush=True)
        del host, gpu
    return points


def parse_suffix_model(text: str) -> tuple[str, int]:
    """``MODEL`` or ``MODEL@TP`` -> (model, tensor-parallel size), checked against the
    model's heads and MLP width, which TP must divide.

    >>> parse_suffix_model("meta-llama/Llama-3.1-70B-Instruct@8")
    ('meta-llama/Llama-3.1-70B-Instruct', 8)
    """
    model_id, _, tp_text = text.partition("@")
    tp = int(tp_text) if tp_text.isdigit() else (1 if not tp_text else 0)
    config = catalog_entry(model_id)["config"]
    if config.get("model_type") not in BUILDABLE:
        raise SystemExit(f"--suffix-models: {model_id!r} has model_type "
                         f"{config.get('model_type')!r}; this script builds "
                         f"{', '.join(sorted(BUILDABLE))} models")
    shared = [config["num_attention_heads"], config["num_key_value_heads"],
              config["intermediate_size"]]
    if tp < 1 or any(n % tp for n in shared):
        raise SystemExit(f"--suffix-models: {text!r}: TP must be a positive whole number "
                         f"dividing the model's heads, KV heads and MLP width {shared}")
    return model_id, tp


def measure_suffix(model_id: str, tp: int, contexts: Sequence[int], suffixes: Sequence[int],
                   kernels: Sequence[str], device: str, repeats: int,
                   sync: Callable[[], None], gpu_memory_gib: float) -> list[SuffixPoint]:
    """Prefill ``suffixes`` new tokens after each of ``contexts`` cached ones, with one
    tensor-parallel rank's share of the model's layers (module docstring, "suffix")."""
    import torch
    import torch.nn.functional as F

    config = catalog_entry(model_id)["config"]
    hidden, layers = config["hidden_size"], config["num_hidden_layers"]
    d = config.get("head_dim") or hidden // config["num_attention_heads"]
    hq, hkv = config["num_attention_heads"] // tp, config["num_key_value_heads"] // tp
    inter = config["intermediate_size"] // tp
    vocab = config["vocab_size"] // tp
    eps = float(config.get("rms_norm_eps", 1e-6))
    dtype = torch.bfloat16
    longest = max(contexts) + max(suffixes)
    kv_bytes = 2 * layers * hkv * d * 2 * longest
    weight_bytes = 2 * (layers * (hidden * (hq + 2 * hkv) * d + hq * d * hidden
                                  + 3 * hidden * inter) + vocab * hidden)
    if device == "cuda" and kv_bytes + weight_bytes > 0.8 * gpu_memory_gib * 2**30:
        print(f"  suffix  {model_id}@{tp}: {(kv_bytes + weight_bytes) / 2**30:.1f} GiB of "
              "weights and KV does not fit 80% of the GPU; skipped", flush=True)
        return []
    torch.manual_seed(0)

    def w(*shape: int) -> Any:
        return torch.randn(*shape, dtype=dtype, device=device) * 0.02

    stack = [{"qkv": w((hq + 2 * hkv) * d, hidden), "o": w(hidden, hq * d),
              "gate_up": w(2 * inter, hidden), "down": w(hidden, inter),
              "norm1": torch.ones(hidden, dtype=dtype, device=device),
              "norm2": torch.ones(hidden, dtype=dtype, device=device),
              "k": torch.zeros(1, hkv, longest, d, dtype=dtype, device=device),
              "v": torch.zeros(1, hkv, longest, d, dtype=dtype, device=device)}
             for _ in range(layers)]
    head = w(vocab, hidden)
    final_norm = torch.ones(hidden, dtype=dtype, device=device)
    backends: dict[str, Any] = {}
    if device == "cuda":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}

    def forward(x: Any, ctx: int, backend: Any) -> None:
        s = x.shape[0]
        with torch.inference_mode(), (sdpa_kernel([backend]) if backend is not None
                                      else contextlib.nullcontext()):
            for layer in stack:
                h = F.rms_norm(x, (hidden,), layer["norm1"], eps)
                q, k, v = F.linear(h, layer["qkv"]).split([hq * d, hkv * d, hkv * d], dim=-1)
                q = q.view(1, s, hq, d).transpose(1, 2)
                k = k.view(1, s, hkv, d).transpose(1, 2)
                v = v.view(1, s, hkv, d).transpose(1, 2)
                layer["k"][:, :, ctx:ctx + s].copy_(k)
                layer["v"][:, :, ctx:ctx + s].copy_(v)
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                if ctx:
                    out = out + F.scaled_dot_product_attention(
                        q, layer["k"][:, :, :ctx], layer["v"][:, :, :ctx], enable_gqa=True)
                x = x + F.linear(out.transpose(1, 2).reshape(s, hq * d), layer["o"])
                h = F.rms_norm(x, (hidden,), layer["norm2"], eps)
                gate, up = F.linear(h, layer["gate_up"]).chunk(2, dim=-1)
                x = x + F.linear(F.silu(gate) * up, layer["down"])
            F.linear(F.rms_norm(x[-1:], (hidden,), final_norm, eps), head)

    def time_kernel(kernel: str) -> list[SuffixPoint]:
        """Every (context, suffix) with one attention kernel; none if PyTorch refuses it."""
        points = []
        for ctx, n in itertools.product(contexts, suffixes):
            x = torch.randn(n, hidden, dtype=dtype, device=device)

            def once(x: Any = x, ctx: int = ctx) -> None:
                forward(x, ctx, backends.get(kernel))

            try:
                run = _graphed(once) if device == "cuda" else once  # as measure_decode
                seconds = median_seconds(run, sync, repeats)
            except RuntimeError as exc:  # this PyTorch has no such kernel for the shapes
                print(f"  suffix  {model_id}@{tp} {kernel}: refused ({exc}); skipped",
                      flush=True)
                return []
            points.append(SuffixPoint(model_id, tp, ctx, n, seconds, kernel))
            print(f"  suffix  {model_id}@{tp} {kernel:5s} {n:>5} new after {ctx:>6} "
                  f"cached: {seconds * 1000:9.2f} ms", flush=True)
        return points

    return [p for kernel in kernels for p in time_kernel(kernel)]


def _smi(query: str) -> str:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip().splitlines()[0].strip() if out.stdout.strip() else ""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def hardware(device: str) -> Hardware:
    import torch
    import transformers

    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        name, mib = props.name, props.total_memory // 2**20
        # the link's maximum: an idle GPU drops its current link generation to save power
        gen, width = _smi("pcie.link.gen.max"), _smi("pcie.link.width.max")
        pcie = f"Gen{gen} x{width}" if gen and width else ""
        driver, cuda = _smi("driver_version"), str(torch.version.cuda or "")
    else:
        name, mib, pcie, driver, cuda = "cpu", 1, "", "", ""
    return Hardware(gpu=name, gpu_memory_mib=mib, catalog_gpu=catalog_gpu_for(name, mib),
                    driver=driver, cuda=cuda, torch=torch.__version__,
                    transformers=transformers.__version__, cpu=_cpu_model(), pcie=pcie)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=list(DEFAULT_MODELS),
                        help="prefill, decode and copy models (none: measure suffixes only)")
    parser.add_argument("--tokens", nargs="+", type=int, default=list(DEFAULT_TOKENS))
    parser.add_argument("--batches", nargs="+", type=int, default=list(DEFAULT_BATCHES),
                        help="decode batch sizes")
    parser.add_argument("--layouts", nargs="+", choices=LAYOUTS, default=list(LAYOUTS),
                        help="decode weight layouts: transformers' unfused, vLLM's fused")
    parser.add_argument("--contexts", nargs="+", type=int, default=[],
                        help="suffix prefill: cached tokens before the new ones (none: skip)")
    parser.add_argument("--suffixes", nargs="+", type=int, default=list(DEFAULT_SUFFIXES),
                        help="suffix prefill: new tokens after each context")
    parser.add_argument("--suffix-models", nargs="+", metavar="MODEL[@TP]",
                        help="suffix prefill models, one TP rank's share with @TP "
                             "(default: --models at TP 1)")
    parser.add_argument("--attention", nargs="+", choices=KERNELS, default=list(KERNELS),
                        help="suffix prefill: PyTorch SDPA attention kernels to time "
                             "(FlashAttention-2, cuDNN's fused attention)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--output", type=Path, help="write the record (JSON) here")
    args = parser.parse_args(argv)
    if args.repeats < 1 or any(n < 1 for n in args.tokens) or any(b < 1 for b in args.batches):
        parser.error("--repeats, --tokens and --batches must be positive")
    if any(n < 0 for n in args.contexts) or any(n < 1 for n in args.suffixes):
        parser.error("--contexts must be 0 or more and --suffixes positive")
    suffix_models = [parse_suffix_model(m) for m in (args.suffix_models or args.models)] \
        if args.contexts else []

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: run on a machine with an NVIDIA GPU, or --device cpu to check "
              "the script", file=sys.stderr)
        return 2
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    hw = hardware(args.device)
    print(f"{hw.gpu} ({hw.gpu_memory_mib} MiB; catalog: {hw.catalog_gpu or 'none'}), driver "
          f"{hw.driver or '-'}, CUDA {hw.cuda or '-'}, PCIe {hw.pcie or '-'}, torch {hw.torch}, "
          f"transformers {hw.transformers}; CPU {hw.cpu}", flush=True)
    memory_gib = hw.gpu_memory_mib / 1024 if args.device == "cuda" else 8.0
    suffix: list[SuffixPoint] = []
    for model_id, tp in suffix_models:
        suffix += measure_suffix(model_id, tp, args.contexts, args.suffixes, args.attention,
                                 args.device, args.repeats, sync, memory_gib)
        if args.device == "cuda":
            torch.cuda.empty_cache()
    prefill: list[PrefillPoint] = []
    copies: list[CopyPoint] = []
    decode: list[DecodePoint] = []
    for model_id, lengths in plan(args.models, args.tokens, memory_gib):
        passes, steps = measure_model(model_id, lengths, args.batches, args.layouts,
                                      args.device, args.repeats, sync)
        prefill += passes
        decode += steps
        if args.device == "cuda":  # the model is gone: free its memory for the next one
            torch.cuda.empty_cache()
            copies += measure_copies(kv_chunk_bytes(model_id), args.repeats, sync)
    record = GpuCalibration(datetime.date.today().isoformat(), hw, tuple(prefill),
                            tuple(copies), tuple(decode), tuple(suffix))
    data = record.to_dict()
    from_dict(data)  # the record reads back as lmikit reads it
    summary = record.summary()
    for p in summary["prefill"]:
        mfu = "-" if p["prefill_mfu"] is None else f"{p['prefill_mfu']:.3f}"
        print(f"prefill_mfu {p['model_id']} {p['tokens']:>6}: {mfu}")
    for d in summary["decode"]:
        eff = "-" if d["hbm_efficiency"] is None else f"{d['hbm_efficiency']:.3f}"
        print(f"decode hbm_efficiency {d['model_id']} {d['layout']:7s} batch {d['batch']:>3}: "
              f"{eff}")
    for p in summary["suffix"]:
        modelled = "-" if p["modelled_seconds"] is None else \
            f"{p['modelled_seconds'] * 1000:.2f} ms modelled"
        print(f"suffix {p['model_id']}@{p['tp']} {p['kernel']:5s} {p['new_tokens']:>5} after "
              f"{p['context_tokens']:>6}: {p['seconds'] * 1000:.2f} ms measured, {modelled}")
    for c in summary["copies"]:
        print(f"{c['direction']} {c['chunks']} x {LMCACHE_CHUNK_TOKENS}-token chunk "
              f"({c['chunk_bytes'] / 1e6:.2f} MB): {c['gbps']:.2f} GB/s")
    if args.output:
        args.output.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
