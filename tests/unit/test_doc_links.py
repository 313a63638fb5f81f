"""Every relative link in README.md and docs/*.md reaches a file, and its #anchor a heading.

Anchors follow GitHub's rule for headings: the heading's text, lowercased, with every character
but letters, digits, spaces, ``-`` and ``_`` dropped and each space made ``-``; a repeated
heading gets ``-1``, ``-2``, ... Headings inside fenced code are not headings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from tests.conftest import ROOT

GUIDE_MAX_LINES = 600
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
LINK = re.compile(r"\[[^\]]*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`[^`\n]*`")


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def _prose_lines(text: str) -> Iterable[str]:
    """The lines of ``text`` outside fenced code blocks."""
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if not fenced:
            yield line


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in _prose_lines(text):
        match = HEADING.match(line)
        if not match:
            continue
        base = anchor(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(text: str) -> list[str]:
    prose = "\n".join(CODE_SPAN.sub("", line) for line in _prose_lines(text))
    return LINK.findall(prose)


def broken_links(doc: Path) -> list[str]:
    """Each relative link of ``doc`` whose file or heading does not exist, with the reason."""
    broken = []
    for target in links(doc.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, fragment = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            broken.append(f"{doc.name}: {target} (no file {path})")
        elif fragment and file.suffix == ".md" and fragment not in anchors(
                file.read_text(encoding="utf-8")):
            broken.append(f"{doc.name}: {target} (no heading #{fragment} in {file.name})")
    return broken


def test_anchor_follows_github_rules() -> None:
    assert anchor("The workload simulator (`lmikit simulate`)") == \
        "the-workload-simulator-lmikit-simulate"
    assert anchor("Tier decision (`kv_cache.mode: auto`)") == "tier-decision-kv_cachemode-auto"
    assert anchor("The planner's model, in detail") == "the-planners-model-in-detail"
    assert anchor("Outside 1.5x, and why") == "outside-15x-and-why"
    assert anchor("What benchmarks/simulate_limits.py measures") == \
        "what-benchmarkssimulate_limitspy-measures"


def test_anchors_skip_code_and_number_repeats() -> None:
    text = "# Title\n\n```bash\n# not a heading\n```\n\n## Step\n\n## Step\n#9997 is an issue\n"
    assert anchors(text) == {"title", "step", "step-1"}


def test_a_broken_file_or_anchor_is_reported(tmp_path: Path) -> None:
    (tmp_path / "target.md").write_text("# Target\n\n## A section\n", encoding="utf-8")
    doc = tmp_path / "doc.md"
    doc.write_text("[ok](target.md#a-section), [self](#intro), `[code](nowhere.md)`\n\n"
                   "## Intro\n\n[gone](target.md#no-such-section) [lost](missing.md)\n"
                   "[web](https://example.com/x.md#y)\n", encoding="utf-8")
    assert broken_links(doc) == [
        "doc.md: target.md#no-such-section (no heading #no-such-section in target.md)",
        "doc.md: missing.md (no file missing.md)"]


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    checked = [target for doc in docs for target in links(doc.read_text(encoding="utf-8"))]
    assert any("planner-model.md#" in target for target in checked)  # the check sees links
    assert [b for doc in docs for b in broken_links(doc)] == []


def test_the_planner_guide_is_at_most_600_lines() -> None:
    lines = (ROOT / "docs" / "planner.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= GUIDE_MAX_LINES, len(lines)


DOTTED = re.compile(r"(?<![\w/.])lmikit(?:\.[A-Za-z_]\w*)+")


def unresolved_names(text: str) -> list[str]:
    """The dotted ``lmikit.…`` names in ``text`` that neither import nor resolve as
    attributes of the longest importable module before them."""
    import importlib

    bad = []
    for ref in sorted(set(DOTTED.findall(text))):
        parts = ref.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                found: object = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for name in parts[cut:]:
                    found = getattr(found, name)
            except AttributeError:
                bad.append(ref)
            break
    return bad


def test_a_stale_module_path_is_reported() -> None:
    assert unresolved_names("`lmikit.render.sagemaker.render_requests` and "
                            "`lmikit.render.render_requests`, `lmikit.sim.GpuCache`") == [
        "lmikit.render.sagemaker.render_requests", "lmikit.sim.GpuCache"]


def test_every_lmikit_name_in_the_readme_and_docs_resolves() -> None:
    """A module moved into its stage's package leaves no stale path in what users read."""
    bad = {path.name: names for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
           if (names := unresolved_names(path.read_text(encoding="utf-8")))}
    assert bad == {}
