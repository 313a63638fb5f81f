"""LMCache's remote stores by kind: what a lookup and a read cost per chunk.

Standard library only. LMCache 0.5.6 reaches a remote store through a connector chosen by
the URL's scheme (``v1/storage_backend/connector/*_adapter.py``). Its lookup asks the
store whether each chunk exists, one chunk after another until the first miss, unless the
connector has a batched existence check (``RemoteBackend.batched_contains`` falls back to
``StorageBackendInterface.batched_contains``, a loop of ``contains``); a read runs one
get per chunk, so many at once as the connector allows. Each row says, with its source,
how many round trips a chunk costs in each, how many reads run at once, and the store's
round trip and read rate where anyone publishes them; a figure nobody publishes is marked
as the assumption it is.

>>> store_for_url("redis://cache:6379").kind, store_for_url("s3://bucket/kv").kind
('redis', 's3')
>>> STORES["hyperpod"].lookup_trips
2
"""

from __future__ import annotations

from dataclasses import dataclass

NETWORK = 0.0  # read rate: the instance's own network (catalog ``network_gbit``)
ALL = 0  # reads in flight: every chunk of the request at once


@dataclass(frozen=True)
class RemoteStore:
    """One kind of remote store as LMCache 0.5.6's connector for it uses it."""

    kind: str
    schemes: tuple[str, ...]
    lookup_trips: int  # round trips per chunk a lookup checks (serial)
    get_trips: int  # sequential round trips per chunk read
    parallel_gets: int  # chunk reads in flight at once (ALL: every chunk)
    rtt_s: float  # one round trip
    gbps: float  # read rate, GB/s (NETWORK: the instance's network)
    source: str


# One row, one source: the connector's functions, then where each figure comes from.
STORES: dict[str, RemoteStore] = {s.kind: s for s in (
    RemoteStore(
        "redis", ("redis", "rediss"), 1, 2, 4, 0.0002, 2.0,
        "connector/redis_connector.py RedisConnector (0.5.6): no support_batched_contains, "
        "so a lookup sends one EXISTS <key>metadata per chunk; _get sends GET <key>metadata "
        "then GET <key>kv_bytes; gets run through AsyncPQExecutor (job_executor/"
        "pq_executor.py, max_workers=4). Round trip: 'the typical latency of a 1 GBits/s "
        "network is about 200 us' (redis.io, Diagnosing latency issues). Read rate: 33.5 MB "
        "values at 14-16 Gb/s to pipelined redis-benchmark clients (LMCache pull request "
        "#1238) and 1.4 GB/s written by the connector (LMCache issue #1239)"),
    RemoteStore(
        "lm", ("lm",), 1, 1, 1, 0.0002, 2.0,
        "connector/lm_connector.py LMCServerConnector (0.5.6): exists and get each send a "
        "message and read its reply on one socket under one asyncio.Lock, so chunks go one "
        "at a time. Round trip and read rate: assumptions, Redis's figures (no published "
        "figure for LMCache's server)"),
    RemoteStore(
        "s3", ("s3",), 1, 1, 64, 0.02, NETWORK,
        "connector/s3_connector.py S3Connector (0.5.6): exists sends a HEAD per chunk, "
        "batched_get a GET_OBJECT per chunk (part size one chunk) through awscrt with "
        "s3_num_io_threads=64 (s3_adapter.py). Round trip: an assumption within the 'tens of "
        "milliseconds' AWS gives as the median latency of small requests (whitepaper "
        "'Best Practices Design Patterns: Optimizing Amazon S3 Performance', Timeouts and "
        "Retries for Latency-Sensitive Applications). Read rate: the instance's network "
        "(no LMCache-on-S3 figure published)"),
    RemoteStore(
        "mooncake", ("mooncakestore",), 1, 1, ALL, 0.0002, NETWORK,
        "connector/mooncakestore_connector.py MooncakestoreConnector (0.5.6): exists calls "
        "store.is_exist per chunk; batched_get is one batch_get_into for every chunk, into "
        "registered buffers. Round trip: an assumption, Redis's 200 us network figure. Read "
        "rate: the instance's network (Mooncake's transfer engine publishes no LMCache-level "
        "rate we could find)"),
    RemoteStore(
        "infinistore", ("infinistore",), 1, 1, ALL, 0.0002, NETWORK,
        "connector/infinistore_connector.py InfinistoreConnector (0.5.6): exists calls "
        "check_exist per chunk; each get is an rdma_read_cache_async, all submitted at once "
        "(RemoteBackend.batched_get_blocking). Round trip and read rate: assumptions, "
        "Redis's network figure and the instance's network"),
    RemoteStore(
        "hyperpod", ("sagemaker-hyperpod",), 2, 2, 100, 0.0002, 2.0,
        "connector/sagemaker_hyperpod_connector.py SageMakerHyperpodConnector (0.5.6): the "
        "node-local ai-toolkit daemon; exists acquires a lease and releases it (two HTTP "
        "requests per chunk, no batched check); get acquires a lease, copies the chunk "
        "from /dev/shm (_read_from_shared_memory) and releases it, every chunk at once "
        "(asyncio.gather) up to sagemaker_hyperpod_max_concurrent_requests=100. AWS "
        "publishes no latency or bandwidth for the tiered storage: the round trip is an "
        "assumption (Redis's 200 us network figure for an HTTP request to the node's own "
        "daemon) and so is the read rate (Redis's 2 GB/s)"),
)}


def store_for_url(url: str | None) -> RemoteStore:
    """The remote store a ``kv_cache.remote_url`` names (Redis without one: the scheme a
    SageMaker spec's remote tier takes in the examples and docs)."""
    scheme = url.split("://", 1)[0].lower() if url and "://" in url else "redis"
    for store in STORES.values():
        if scheme in store.schemes:
            return store
    raise ValueError(f"no remote store is known for {scheme}:// URLs; known: "
                     + ", ".join(f"{s}://" for st in STORES.values() for s in st.schemes))
