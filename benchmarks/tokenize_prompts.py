"""How fast vLLM's tokenizer encodes a prompt: English text against decoded random token ids.

The simulator charges every prompt ``tokenize_s_per_token`` (vLLM's API server tokenizes it
before the engine sees it; ``lmikit.sim._coefficients``), a rate published for English text.
Benchmark clients such as inference-perf and SGLang's ``bench_serving`` send prompts made of
random token ids decoded to text instead. This script encodes both with the HuggingFace
``tokenizers`` library (the Rust tokenizer behind vLLM's fast tokenizers) and prints the
encode time per token, to check that the rate holds for such prompts, and how many tokens
the decoded random prompt re-encodes to per id drawn ("per id").

Needs ``tokenizers`` and, for a tiktoken ranks file, ``transformers`` (its
``TikTokenConverter``); nothing else in lmikit does. Downloads nothing:

    pip install tokenizers transformers tiktoken
    python benchmarks/tokenize_prompts.py --tiktoken qwen.tiktoken --pattern qwen2
    python benchmarks/tokenize_prompts.py --tiktoken tokenizer.model --pattern llama3
    python benchmarks/tokenize_prompts.py --tokenizer-json tokenizer.json

Qwen's ranks ship as ``dashscope/resources/qwen.tiktoken`` in the ``dashscope`` 2.0.2 wheel on
PyPI, Llama 3's (Llama 3.1 uses them too) as ``llama_models/llama3/api/tokenizer.model`` in
the ``llama-models`` 0.1.4 wheel. Each figure is the median of ``--repeats`` encodes after
one untimed encode: the same English text each time (the BPE word cache warm, the best
case), a new random prompt each time (its words mostly unseen, the worst case). The English
text is the docstrings of Python's standard library modules.
"""

from __future__ import annotations

import argparse
import importlib
import platform
import random
import time
from pathlib import Path
from typing import Any

# The pre-tokenizer split patterns of the two tokenizer families (their tokenizer.json files)
PATTERNS = {
    "qwen2": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"""
             r"""[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    "llama3": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}"""
              r"""\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
}
STDLIB_MODULES = ("argparse", "asyncio", "collections", "csv", "dataclasses", "decimal",
                  "email", "functools", "json", "logging", "pathlib", "pickle", "re",
                  "shutil", "subprocess", "tarfile", "threading", "unittest",
                  "urllib.parse", "zipfile")


def load_tokenizer(args: argparse.Namespace) -> Any:
    if args.tokenizer_json:
        from tokenizers import Tokenizer

        return Tokenizer.from_file(args.tokenizer_json)
    from tokenizers import normalizers
    from transformers.convert_slow_tokenizer import TikTokenConverter

    tok = TikTokenConverter(vocab_file=args.tiktoken, pattern=PATTERNS[args.pattern]).converted()
    if args.pattern == "qwen2":
        tok.normalizer = normalizers.NFC()  # Qwen2's tokenizer.json normalizes to NFC
    return tok


def english(tok: Any, tokens: int) -> str:
    docs: list[str] = []
    for name in STDLIB_MODULES:
        module = importlib.import_module(name)
        for obj in (module, *(getattr(module, a) for a in sorted(dir(module))
                              if not a.startswith("_"))):
            doc = getattr(obj, "__doc__", None)
            if isinstance(doc, str) and doc not in docs:
                docs.append(doc)
    text = "\n\n".join(docs)
    while len(tok.encode(text).ids) < tokens:
        text += "\n\n" + text
    return str(tok.decode(tok.encode(text).ids[:tokens]))


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def random_prompt(tok: Any, tokens: int, rng: random.Random, vocab: int) -> str:
    """As inference-perf's shared_prefix generator builds one: random ids, decoded."""
    return str(tok.decode([rng.randrange(vocab) for _ in range(tokens)],
                          skip_special_tokens=True))


def time_encode(tok: Any, texts: list[str]) -> tuple[float, int, int]:
    """Median encode seconds over ``texts`` (the first encoded once untimed), and the
    median text's token and byte counts."""
    tok.encode(texts[0])
    runs = []
    for text in texts:
        start = time.perf_counter()
        n = len(tok.encode(text).ids)
        runs.append((time.perf_counter() - start, n, len(text.encode())))
    runs.sort()
    return runs[len(runs) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--tiktoken", help="a tiktoken ranks file (e.g. qwen.tiktoken)")
    src.add_argument("--tokenizer-json", help="a HuggingFace tokenizer.json")
    ap.add_argument("--pattern", choices=sorted(PATTERNS), default="qwen2",
                    help="split pattern for a tiktoken file")
    ap.add_argument("--tokens", type=int, nargs="+", default=[1_200, 7_200, 9_000])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from lmikit.sim import Coefficients

    tok = load_tokenizer(args)
    vocab = tok.get_vocab_size(with_added_tokens=False)
    rng = random.Random(args.seed)
    model = Coefficients().tokenize_s_per_token * 1e6
    print(f"CPU: {cpu_name()} ({platform.platform()}); "
          f"vocabulary {vocab:,}; lmikit charges {model:.2f} us per token")
    print(f"{'prompt':<22}{'tokens':>8}{'per id':>8}{'bytes':>9}{'encode ms':>11}"
          f"{'us/token':>10}{'MB/s':>7}")
    for n in args.tokens:
        text = english(tok, n)
        fresh = [random_prompt(tok, n, rng, vocab) for _ in range(args.repeats + 1)]
        for label, texts in ((f"English {n}", [text] * (args.repeats + 1)),
                             (f"random ids {n}", fresh)):
            seconds, count, size = time_encode(tok, texts)
            # a decoded random prompt re-encodes to more tokens than the ids it was drawn
            # from: what vLLM sees of an inference-perf prompt before exact-length text
            per_id = f"{count / n:.3f}" if label.startswith("random") else "-"
            print(f"{label:<22}{count:>8,}{per_id:>8}{size:>9,}{seconds * 1e3:>11.2f}"
                  f"{seconds / count * 1e6:>10.2f}{size / seconds / 1e6:>7.2f}")


if __name__ == "__main__":
    main()
