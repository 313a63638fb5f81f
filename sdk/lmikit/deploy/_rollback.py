"""Undo a failed run, newest step first, and say where that leaves the account."""

from __future__ import annotations

import concurrent.futures as cf

from lmikit.deploy._run import Run, Undo
from lmikit.errors import LmikitError


def roll_back(run: Run) -> tuple[list[str], list[str]]:
    """Run the journal backwards; returns (what was undone, what is left changed).

    Consecutive undos of one group (adapter components) run in parallel. After a second
    Ctrl-C nothing more is undone: what remains is listed as left."""
    done: list[str] = []
    left: list[str] = []
    entries = list(reversed(run.journal))
    i = 0
    while i < len(entries):
        if run.interrupts.abandon:
            left += [f"{u.left} (not rolled back: stopped by a second Ctrl-C)"
                     for u in entries[i:]]
            break
        j = i + 1
        while entries[i].group and j < len(entries) and entries[j].group == entries[i].group:
            j += 1
        batch = entries[i:j]
        try:
            results = _run_batch(run, batch)
        except KeyboardInterrupt:
            if not run.interrupts.handler_installed:
                run.interrupts.press()
            if not run.interrupts.abandon:  # a first press while rolling back: go on
                continue
            left += [f"{u.left} (not rolled back: stopped by a second Ctrl-C)"
                     for u in entries[i:]]
            break
        for ok, text in results:
            (done if ok else left).append(text)
        i = j
    return done, left


def _undo_one(undo: Undo) -> tuple[bool, str] | None:
    try:
        did = undo.run()
    except LmikitError as exc:
        return False, f"{undo.left}: {exc}"
    return (True, did) if did else None


def _run_batch(run: Run, batch: list[Undo]) -> list[tuple[bool, str]]:
    if len(batch) == 1:
        one = _undo_one(batch[0])
        return [one] if one else []
    pool = cf.ThreadPoolExecutor(max_workers=min(run.max_workers, len(batch)))
    futures = [pool.submit(_undo_one, u) for u in batch]
    try:
        pending = set(futures)
        while pending:
            _, pending = cf.wait(pending)
    finally:
        pool.shutdown(wait=not run.interrupts.abandon, cancel_futures=True)
    return [r for f in futures if not f.cancelled() and (r := f.result())]
