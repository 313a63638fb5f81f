"""Wall time of the README's sandbox deploy, with exactly the exports `lmikit sandbox serve`
prints and nothing else (no LMIKIT_* variable of the caller's).

Starts `lmikit sandbox serve` on a free pair of ports, reads the `export` lines it prints,
writes the README's walk-through spec (Qwen2.5-7B on ml.g6e.2xlarge, one zero-weight adapter) and
times `lmikit deploy spec.yaml --create-role` (the role, the endpoint, the base and adapter
components, scaling, dashboard and alarms), then a second deploy (no changes) and
`lmikit destroy --yes`. Target on the project's 2-core machines: the first deploy well under
30 s.

    python benchmarks/sandbox_deploy.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LMIKIT = Path(sys.executable).parent / "lmikit"  # the installed console script
TARGET_S = 30.0


def readme_spec() -> str:
    """The spec of the README's sandbox walk-through (its `cat > spec.yaml` block)."""
    text = (ROOT / "README.md").read_text()
    start = text.index("$ cat > spec.yaml <<'YAML'\n") + len("$ cat > spec.yaml <<'YAML'\n")
    return text[start:text.index("\nYAML\n", start) + 1]


def printed_exports(server: subprocess.Popen[str]) -> dict[str, str]:
    """The `export K=V` lines the sandbox prints, read until it says how to stop it."""
    exports: dict[str, str] = {}
    assert server.stdout is not None
    for line in server.stdout:
        found = re.fullmatch(r"export (\w+)=(\S+)\n?", line)
        if found:
            exports[found[1]] = found[2]
        if line.startswith("Press Ctrl-C"):
            return exports
    raise RuntimeError("the sandbox stopped before printing its exports")


def timed(command: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    from lmikit.testing import write_lora_adapter
    from lmikit.testing._server import free_port_pair

    port = free_port_pair("127.0.0.1")
    if port is None:
        print("no free pair of ports on 127.0.0.1")
        return 1
    server = subprocess.Popen([str(LMIKIT), "sandbox", "serve", "--port", str(port)],
                              stdout=subprocess.PIPE, text=True)
    try:
        exports = printed_exports(server)
        keep = {k: v for k, v in os.environ.items()
                if k in ("PATH", "HOME", "LANG", "TMPDIR", "SYSTEMROOT")}
        env = {**keep, "AWS_CONFIG_FILE": os.devnull,
               "AWS_SHARED_CREDENTIALS_FILE": os.devnull, **exports}
        with tempfile.TemporaryDirectory() as folder:
            demo = Path(folder)
            write_lora_adapter(demo / "adapters" / "legal")
            (demo / "spec.yaml").write_text(readme_spec())
            deploy = [str(LMIKIT), "deploy", "spec.yaml", "--create-role"]
            first = timed(deploy, env, demo)
            again = timed(deploy, env, demo)
            destroy = timed([str(LMIKIT), "destroy", "spec.yaml", "--yes"], env, demo)
    finally:
        server.terminate()
        server.wait(30)
    print("exports printed: " + " ".join(sorted(exports)))
    print(f"{'step':34s} {'wall s':>7s}")
    print(f"{'deploy --create-role (first)':34s} {first:7.1f}   target < {TARGET_S:.0f} "
          + ("ok" if first < TARGET_S else "SLOW"))
    print(f"{'deploy --create-role (no changes)':34s} {again:7.1f}")
    print(f"{'destroy --yes':34s} {destroy:7.1f}")
    return 0 if first < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
