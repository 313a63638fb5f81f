from __future__ import annotations

import os
import random
import subprocess
import sys

from lmikit.sim._tiers import (
    GpuCache,
    LruTier,
    UnboundedTier,
    chunk_keys,
    id_chunk_keys,
    token_chunk_keys,
)


def test_lru_tier_evicts_least_recently_used_beyond_capacity() -> None:
    t = LruTier(3)
    t.insert([1, 2, 3])
    t.touch([1])
    t.insert([4])
    assert list(t) == [3, 1, 4] and t.evictions == 1


def test_lru_tier_match_stops_at_first_missing_key() -> None:
    t = LruTier(10)
    t.insert([1, 2, 4])
    assert t.match([1, 2, 3, 4]) == 2
    assert t.match([1, 2, 3, 4], start=3) == 1
    assert t.match([9, 1]) == 0


def test_unbounded_tier_never_evicts() -> None:
    t = UnboundedTier()
    t.insert(range(10_000))
    assert len(t) == 10_000 and t.evictions == 0


def test_chunk_keys_cover_full_chunks_only() -> None:
    assert len(chunk_keys([(1, 511)], 256)) == 1
    assert len(chunk_keys([(1, 512)], 256)) == 2
    assert chunk_keys([(1, 255)], 256) == ()


def test_chunk_keys_are_chained_so_a_different_start_changes_every_key() -> None:
    a = chunk_keys([(1, 256), (2, 512)], 256)
    b = chunk_keys([(9, 256), (2, 512)], 256)
    assert not set(a) & set(b)


def test_partial_hit_shares_the_leading_chunks_only() -> None:
    doc = chunk_keys([(1, 1000), (2, 100)], 256)
    other_question = chunk_keys([(1, 1000), (3, 100)], 256)
    assert doc[:3] == other_question[:3]  # 768 tokens of the document
    assert doc[3] != other_question[3]  # the chunk that holds the question differs
    t = LruTier(100)
    t.insert(doc)
    assert t.match(other_question) == 3


def test_chunk_that_straddles_two_segments_depends_on_both() -> None:
    assert chunk_keys([(1, 128), (2, 128)], 256) != chunk_keys([(1, 128), (3, 128)], 256)


def test_token_and_id_keys_are_chained() -> None:
    assert token_chunk_keys(list(range(600)), 256)[:2] == token_chunk_keys(
        list(range(512)), 256)
    assert id_chunk_keys(["a", "b"])[0] == id_chunk_keys(["a", "c"])[0]
    assert id_chunk_keys(["a", "b"])[1] != id_chunk_keys(["c", "b"])[1]


def test_keys_do_not_depend_on_pythonhashseed() -> None:
    code = ("from lmikit.sim._tiers import chunk_keys, id_chunk_keys, stable_id;"
            "print(chunk_keys([(1, 600)], 256), id_chunk_keys(['x', 7]), stable_id('s'))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}, check=True).stdout
            for seed in ("1", "2")}
    assert len(outs) == 1


def test_gpu_cache_never_evicts_pinned_chunks_and_holds_a_shared_one_once() -> None:
    g = GpuCache(3)
    g.pin([1, 2])
    g.pin([1])
    assert g.used_chunks() == 2
    g.insert([5, 6, 7])  # room for one cached chunk beside the two pinned
    # freed tail first (vLLM's SingleTypeKVCacheManager.free), so the head chunk stays
    assert 1 in g and 2 in g and 5 in g and 6 not in g and 7 not in g
    g.unpin([1])
    assert 1 in g.pinned  # still used by the first request
    g.unpin([1, 2])
    assert g.used_chunks() == 0 and g.match([1, 2]) == 2  # freed chunks stay cached


def test_gpu_cache_private_tokens_take_room_from_the_cache() -> None:
    g = GpuCache(4, chunk=256)
    g.insert([1, 2, 3, 4])
    g.private = 300  # two chunks' worth
    g.shrink()
    assert len(g) == 2 and g.match([1, 2]) == 2 and g.free_tokens() == 724


def test_a_freed_prefix_outlives_its_suffix_in_the_gpu_pool() -> None:
    # vLLM frees a request's blocks in reverse "so that the tail blocks are freed first"
    # and evicts the least recently freed: under pressure a cached prompt loses its last
    # chunks, and the chained keys of its first ones still match the next request
    g = GpuCache(4)
    g.pin([1, 2, 3, 4])
    g.unpin([1, 2, 3, 4])
    g.pin([9, 8])  # another request takes two chunks
    g.shrink()
    assert g.match([1, 2, 3, 4]) == 2 and 3 not in g and 4 not in g


def test_room_a_request_frees_is_reused_after_what_was_freed_before_it() -> None:
    # vLLM appends every block a request frees to the tail of its free queue, cached or not,
    # and takes new blocks from the head (BlockPool.free_blocks, get_new_blocks): the room
    # of output no prompt names is taken after an older cached prompt, not before it
    g = GpuCache(4, chunk=256)
    g.pin([1, 2])
    g.unpin([1, 2])  # a prompt, cached
    g.free(2 * 256 + 100)  # then a request's output: two whole chunks, the rest is room
    assert len(g) == 4 and g.free_tokens() == 4 * 256
    g.private = 2 * 256  # the next request takes two chunks' room
    g.shrink()
    assert g.match([1, 2]) == 0 and g.evictions == 2  # the prompt went, not the room
    g.private = 4 * 256
    g.shrink()
    assert len(g) == 0 and g.evictions == 2  # evicting room evicts no cached chunk


def test_freed_chunks_are_taken_back_first_chunk_first() -> None:
    # freed tail first (vLLM's SingleTypeKVCacheManager.free): under pressure the last of
    # a request's freed chunks goes first, and what is left is its first ones, in order
    g = GpuCache(4, chunk=256)
    keys = g.free(3 * 256)
    assert len(keys) == 3 and list(keys) == sorted(keys)
    g.private = 2 * 256
    g.shrink()
    assert g.take(keys) == 2 and len(g) == 0 and g.take(keys) == 0


def test_an_lmcache_hit_keeps_its_prefix_longest() -> None:
    # LMCache's touch_cache walks a hit's keys in reverse ("flip the order of the keys in
    # the request"), so the first chunk of a prefix is the most recently used
    t = LruTier(4)
    t.insert([1, 2, 3, 4])
    t.touch([1, 2, 3, 4])
    t.insert([5, 6])
    assert list(t) == [2, 1, 5, 6] and t.match([1, 2, 3]) == 2


def test_a_gpu_pool_chunk_is_pinned_or_cached_never_both() -> None:
    # ``GpuCache.unpinned`` counts cached keys only, on this rule; random pins, unpins,
    # inserts, frees and take-backs must keep it
    rng = random.Random(7)
    g = GpuCache(12, 4)
    pins: list[list[int]] = []
    freed: list[range] = []
    for _ in range(3_000):
        op = rng.randrange(5)
        keys = rng.sample(range(30), rng.randrange(1, 6))
        if op == 0:
            g.pin(keys)
            pins.append(keys)
        elif op == 1 and pins:
            g.unpin(pins.pop(rng.randrange(len(pins))))
        elif op == 2:
            g.insert(keys)
        elif op == 3:
            freed.append(g.free(rng.randrange(0, 13)))
        elif freed:
            g.take(freed.pop(rng.randrange(len(freed))))
        cached = set(g._lru)
        assert not cached & set(g.pinned)
        assert g.unpinned(keys) == sum(1 for k in keys if k in cached)


def test_lmcache_cpu_tier_leaves_a_held_key_in_place_and_the_disk_tier_refreshes_it() -> None:
    # LocalCPUBackend.submit_put_task returns for a key it holds; the disk backend re-adds it
    cpu, disk = LruTier(3, refresh=False), LruTier(3)
    for t in (cpu, disk):
        t.insert([1, 2, 3])
    cpu.insert([1, 4])
    disk.insert([1, 4])
    assert list(cpu) == [2, 3, 4] and cpu.evictions == 1
    assert list(disk) == [3, 1, 4] and disk.evictions == 1
