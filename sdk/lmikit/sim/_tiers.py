"""Cache tiers: chunk keys chained like LMCache's, and LRU tiers that hold them.

LMCache (0.5.6, ``lmcache/v1/token_database.py`` ``ChunkedTokenDatabase._prefix_hash``) keys
each chunk by a hash of the previous chunk's key and the chunk's tokens, so a chunk matches
only when everything before it matches too; ``save_unfull_chunk`` is off by default
(``lmcache/v1/config.py``), so a trailing partial chunk is never stored. Its storage manager
(``storage_backend/storage_manager.py``) puts every new chunk into every backend and looks
keys up backend by backend (CPU, then disk, then remote), continuing where the previous one
stopped. vLLM's GPU prefix cache is modelled at the same chunk granularity.

Prompts are described by *segments*: ``(content_id, tokens)`` pairs (a document, a question,
a turn of a conversation). Two prompts share a chunk key when they share every token up to
its end.

>>> a = chunk_keys([(1, 600), (2, 50)], 256)
>>> b = chunk_keys([(1, 600), (3, 50)], 256)
>>> len(a), a == b
(2, True)
>>> t = LruTier(2)
>>> t.insert([1, 2, 3]); list(t)
[2, 3]
>>> t.match([2, 3, 4]), t.match([3])
(2, 1)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import cast

ROOT_KEY = 0


def chunk_keys(segments: Sequence[tuple[int, int]], chunk: int) -> tuple[int, ...]:
    """Chained keys of every FULL chunk of a prompt made of ``(content_id, tokens)``."""
    keys: list[int] = []
    prev = ROOT_KEY
    pieces: list[tuple[int, int, int]] = []
    filled = 0
    for content, length in segments:
        offset = 0
        while offset < length:
            take = min(chunk - filled, length - offset)
            pieces.append((content, offset, take))
            filled += take
            offset += take
            if filled == chunk:
                prev = hash((prev, tuple(pieces)))
                keys.append(prev)
                pieces = []
                filled = 0
    return tuple(keys)


def token_chunk_keys(token_ids: Sequence[int], chunk: int) -> tuple[int, ...]:
    """Chained keys of every full chunk of a prompt given as token ids."""
    keys: list[int] = []
    prev = ROOT_KEY
    for start in range(0, len(token_ids) - chunk + 1, chunk):
        prev = hash((prev, tuple(token_ids[start:start + chunk])))
        keys.append(prev)
    return tuple(keys)


def id_chunk_keys(chunk_ids: Sequence[int | str]) -> tuple[int, ...]:
    """Chained keys from per-chunk content ids (a trace's hashed chunk ids)."""
    keys: list[int] = []
    prev = ROOT_KEY
    for cid in chunk_ids:
        prev = hash((prev, stable_id(cid)))
        keys.append(prev)
    return tuple(keys)


def stable_id(value: int | str) -> int:
    """An int for a content id that does not depend on PYTHONHASHSEED."""
    if isinstance(value, int):
        return value
    import zlib

    # surrogatepass: JSON can name a lone surrogate ("\\ud800"), which strict UTF-8 refuses
    data = value.encode("utf-8", "surrogatepass")
    return zlib.crc32(data) * 2**32 + zlib.adler32(data)


# Keys of freed blocks no prompt names lie above every ``hash()`` (a signed 64-bit value)
_ANONYMOUS = 1 << 64

# The tiers take and hold their keys (ints) as ``object``: compiled by mypyc (``setup.py``),
# an ``int`` read from a tuple of keys is unboxed to a C integer and boxed again for every
# dict operation, a new int object each time for about half of all 64-bit hashes; an
# ``object`` is passed through as it is. The results are the same.


def _evict_lru(held: OrderedDict[object, None], room: int) -> int:
    """Drop the least recently used keys beyond ``room``; how many cached chunks that
    dropped (room :meth:`GpuCache.free` returned without a name is not one)."""
    dropped = 0
    pop = held.popitem
    for _ in range(len(held) - room):
        if cast(int, pop(False)[0]) < _ANONYMOUS:
            dropped += 1
    return dropped


class LruTier:
    """A cache of chunk keys with a capacity in chunks and least-recently-used eviction."""

    __slots__ = ("capacity", "refresh", "_keys", "evictions")

    def __init__(self, capacity: int, refresh: bool = True) -> None:
        self.capacity = max(0, int(capacity))
        # whether storing a key it holds makes it the most recent (:meth:`insert`)
        self.refresh = refresh
        self._keys: OrderedDict[object, None] = OrderedDict()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __iter__(self) -> Iterator[int]:
        return iter(cast("OrderedDict[int, None]", self._keys))

    def match(self, keys: Sequence[object], start: int = 0) -> int:
        """How many keys from ``start`` on are held, stopping at the first one that is not."""
        held = self._keys
        n = 0
        for k in keys[start:] if start else keys:
            if k not in held:
                break
            n += 1
        return n

    def touch(self, keys: Sequence[object]) -> None:
        """Mark a hit's keys as just used, the first most recently: LMCache's
        ``touch_cache`` walks a lookup's keys in reverse ("flip the order of the keys in the
        request", ``v1/storage_backend/local_cpu_backend.py`` and ``local_disk_backend.py``,
        0.5.6), so a prefix is evicted after its suffix."""
        move = self._keys.move_to_end
        for k in reversed(keys):
            move(k)

    def insert(self, keys: Iterable[object]) -> None:
        """Add keys, evicting the least recently used beyond capacity. A key held already
        becomes the most recent, unless the tier was made with ``refresh=False``: LMCache's
        CPU tier returns from a put of a key it holds (``LocalCPUBackend.submit_put_task``,
        ``if key in self.hot_cache``, in the PyPI wheels of 0.3.3 and 0.5.6), where its disk
        tier refreshes one (``LocalDiskBackend.insert_key`` pops and re-adds it in 0.3.3,
        ``submit_put_task`` calls ``cache_policy.update_on_hit`` in 0.5.6)."""
        held = self._keys
        move = held.move_to_end if self.refresh else None
        for k in keys:
            if k not in held:
                held[k] = None
            elif move is not None:
                move(k)
        self.shrink()

    def shrink(self) -> None:
        if len(self._keys) > self.capacity:
            self.evictions += _evict_lru(self._keys, self.capacity)


class UnboundedTier(LruTier):
    """A remote store sized beyond any working set: it never evicts."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0)

    def shrink(self) -> None:
        return None


class GpuCache:
    """vLLM's GPU KV pool: blocks in use are pinned, the rest are a prefix cache.

    vLLM (``v1/core/block_pool.py``, ``kv_cache_manager.py``) reference-counts KV blocks:
    a block that an admitted request uses cannot be evicted, and one block serves every
    request that shares it (a shared prefix is held once however many requests read it).
    A block nobody uses stays cached for a later hit until the pool needs its room, least
    recently freed first. Here a block is one chunk key; ``private`` counts the tokens of
    admitted requests that no key names (prompt tails, output and not-yet-computed
    chunks).

    >>> g = GpuCache(4)
    >>> g.pin([1, 2]); g.pin([1, 3]); g.used_chunks(), g.match([1, 2, 9])
    (3, 2)
    >>> g.unpin([1, 3]); g.insert([7, 8]); g.match([3]), 7 in g, 8 in g
    (0, True, True)
    """

    __slots__ = ("pool", "chunk", "private", "pinned", "_lru", "evictions", "_anonymous")

    def __init__(self, pool_chunks: int, chunk: int = 1) -> None:
        self.pool = max(0, int(pool_chunks))
        self.chunk = chunk
        self.private = 0  # tokens
        self.pinned: dict[object, int] = {}
        self._lru: OrderedDict[object, None] = OrderedDict()
        self.evictions = 0  # cached chunks evicted (not freed blocks no prompt names)
        self._anonymous = _ANONYMOUS

    def __contains__(self, key: object) -> bool:
        return key in self.pinned or key in self._lru

    def __len__(self) -> int:
        return len(self.pinned) + len(self._lru)

    def match(self, keys: Sequence[object], start: int = 0) -> int:
        """How many keys from ``start`` on are held (pinned or cached), as a prefix."""
        pinned, held = self.pinned, self._lru
        n = 0
        for k in keys[start:] if start else keys:
            if k not in pinned and k not in held:
                break
            n += 1
        return n

    def unpinned(self, keys: Iterable[object]) -> int:
        """How many of ``keys`` are cached but not pinned (pinning them takes room).

        A key is pinned or cached, never both: :meth:`pin` takes it out of the cache."""
        return sum(map(self._lru.__contains__, keys))

    def used_chunks(self) -> int:
        """Pinned chunks plus private tokens, in chunks (vLLM's KV cache usage)."""
        return len(self.pinned) + -(-self.private // self.chunk)

    def free_tokens(self) -> int:
        """Tokens of the pool not in use: empty or holding evictable cached chunks."""
        return (self.pool - len(self.pinned)) * self.chunk - self.private

    def pin(self, keys: Iterable[object]) -> None:
        pinned, held = self.pinned, self._lru
        for k in keys:
            c = pinned.get(k)
            if c:
                pinned[k] = c + 1
            else:
                held.pop(k, None)
                pinned[k] = 1

    def unpin(self, keys: Sequence[object]) -> None:
        """Release a request's keys; those no request uses any more become the most recent
        cached, the first most recently: vLLM frees a request's blocks in reverse "so that
        the tail blocks are freed first" (``SingleTypeKVCacheManager.free``), and evicts
        the least recently freed, so a prefix outlives its suffix."""
        pinned, held = self.pinned, self._lru
        for k in reversed(keys):
            c = pinned[k] - 1
            if c:
                pinned[k] = c
            else:
                del pinned[k]
                held[k] = None
        self.shrink()

    def touch(self, keys: Sequence[object]) -> None:
        """Mark cached keys as just used, the first most recently (as :meth:`unpin`)."""
        held = self._lru
        for k in reversed(keys):
            if k in held:
                held.move_to_end(k)

    def insert(self, keys: Sequence[object]) -> None:
        """Cache computed keys nobody pins (or refresh them), freed tail first as
        :meth:`unpin` frees them."""
        pinned, held = self.pinned, self._lru
        for k in reversed(keys):
            if k in pinned:
                continue
            if k in held:
                held.move_to_end(k)
            else:
                held[k] = None
        self.shrink()

    def free(self, tokens: int) -> range:
        """Return ``tokens`` of freed blocks that no prompt names (a prompt's partial last
        block, output no later prompt repeats, blocks allocated but never computed) as the
        most recently freed, in whole chunks (what is left of one is room, as the pool is
        in whole chunks), the last freed first; the keys they get, in token order.

        vLLM appends every block a request frees to the tail of its free queue, cached or
        not, and takes new blocks from the head (``BlockPool.free_blocks``,
        ``get_new_blocks``): the room a finished request leaves is reused only after every
        block freed before it, so it displaces older cached prefixes, not newer ones.
        """
        start = self._anonymous
        keys = range(start, start + max(0, tokens) // self.chunk)
        self._anonymous = keys.stop
        held = self._lru
        for key in reversed(keys):
            held[key] = None
        self.shrink()
        return keys

    def take(self, keys: Sequence[object]) -> int:
        """Take back the cached prefix of ``keys`` (chunks :meth:`free` named), now in use
        again: how many."""
        held = self._lru
        n = 0
        for k in keys:
            if k not in held:
                break
            del held[k]
            n += 1
        return n

    def shrink(self) -> None:
        """Evict least recently used cached chunks beyond the room left by the pinned."""
        room = self.pool - self.used_chunks()
        if len(self._lru) > room:
            self.evictions += _evict_lru(self._lru, max(0, room))
