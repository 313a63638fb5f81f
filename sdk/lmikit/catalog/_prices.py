"""SageMaker real-time inference on-demand prices: one dated table, each row with its source.

Standard library only. Only prices with a public source are listed; anything else has no
price (callers say so, or take one from the user). No public copy of AWS's price list
was found for ml.g5.16xlarge, ml.g6.4xlarge, ml.g6.8xlarge, ml.g6e.16xlarge-48xlarge,
ml.p4de, ml.p5e, ml.p5en, ml.p5.4xlarge or ml.p6-b200, nor for any region other than
us-east-1: those stay unpriced here (``test_prices.py`` holds this list to the catalog).

For every other type and region, ``lmikit prices fetch`` reads AWS's own price list
(:mod:`lmikit.catalog`) into a *price file*, a :class:`PriceTable` that
:func:`hourly_price` consults before this table (``--prices FILE``); ``--hourly-price`` sets
one price by hand. Prices change and differ by region, savings plan and discount: these are
list prices, not a bill.

>>> p = hourly_price("ml.g5.2xlarge", "us-east-1")
>>> p.usd, p.as_of
(1.52, '2026-03-15')
>>> hourly_price("ml.g5.2xlarge", "eu-west-1") is None
True
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from lmikit.catalog._instances import ml_name


@dataclass(frozen=True)
class Price:
    usd: float  # per instance-hour, on demand
    region: str
    as_of: str  # date of the source
    source: str
    sku: str = ""  # the AWS price list's SKU and usage type (fetched prices only)
    usage_type: str = ""
    fetched_at: str = ""  # when it was read from the price list (UTC; fetched prices only)


_WRING = "wring.co 'AWS SageMaker inference guide' table"
# aws-samples/foundation-model-benchmarking-tool fmbench/configs/pricing_fallback.yml
# (last changed 2025-01-26), "SageMaker Hourly Instance Pricing" for endpoints. The file
# names no region; its ml.g5.xlarge, ml.g5.2xlarge and ml.p4d.24xlarge figures (1.4084,
# 1.515, 37.688) are the us-east-1 ones the two sources above list, so it is read as
# us-east-1.
_FMBENCH = ("aws-samples/foundation-model-benchmarking-tool "
            "fmbench/configs/pricing_fallback.yml (SageMaker endpoint hourly prices; "
            "us-east-1 by agreement with the listed us-east-1 rows)")
_FMBENCH_DATE = "2025-01-26"
_FMBENCH_USD = {
    "ml.g5.4xlarge": 2.03, "ml.g5.8xlarge": 3.06, "ml.g5.12xlarge": 7.09,
    "ml.g5.24xlarge": 10.18, "ml.g5.48xlarge": 20.36, "ml.g6.2xlarge": 1.222,
    "ml.g6.12xlarge": 5.752, "ml.g6.16xlarge": 4.246, "ml.g6.24xlarge": 8.344,
    "ml.g6.48xlarge": 16.688, "ml.p5.48xlarge": 113.068,
}
# AWS's Price List for AmazonSageMaker in us-east-1, its real-time hosting rows (usage type
# USE1-Host:<type>), as two public documents quote it. Neither copy of the list was read here.
# 1. A research note of 2026-10-06 on SageMaker JumpStart speech-to-text models, which read
#    the bulk file https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonSageMaker/
#    current/us-east-1/index.csv at version 20261005212151 (published 2026-10-05T21:21:51Z)
#    and quotes its rows to four decimals. Its ml.g5.2xlarge, ml.g6.2xlarge and
#    ml.g6.16xlarge rows (1.515, 1.222, 4.246) are the fmbench figures above.
# 2. A cost model for image-generation hosting, rates "captured 2026-08-17T23:40:00Z from the
#    AWS Pricing API" (`aws pricing get-products --service-code AmazonSageMaker`) and used
#    for real-time and asynchronous endpoints; mostly to the cent. Its ml.g6e.2xlarge and
#    ml.g6e.12xlarge (2.80, 13.12) are the bulk file's rounded; its ml.g5.xlarge and
#    ml.g5.2xlarge (1.408, 1.515) are fmbench's.
_BULK = ("AWS Price List bulk file AmazonSageMaker us-east-1, version 20261005212151, usage "
         "type USE1-Host:{name}, as quoted by a public 2026-10-06 research note")
_BULK_DATE = "2026-10-05"
_BULK_USD = {"ml.g6.xlarge": 1.1267, "ml.g6e.2xlarge": 2.8026, "ml.g6e.12xlarge": 13.1158}
_QUERY = ("AWS Price List Query API (AmazonSageMaker, us-east-1, real-time hosting), read "
          "2026-08-17, as quoted by a public image-generation cost model")
_QUERY_DATE = "2026-08-17"
_QUERY_USD = {"ml.g6e.xlarge": 2.61, "ml.g6e.4xlarge": 3.76, "ml.g6e.8xlarge": 5.6607}
PRICES: dict[tuple[str, str], Price] = {
    ("us-east-1", "ml.g5.xlarge"): Price(
        1.41, "us-east-1", "2025-10", "zircon.tech 'Real cost of running AI models on "
        "SageMaker', us-east-1, Oct 2025"),
    ("us-east-1", "ml.g5.2xlarge"): Price(1.52, "us-east-1", "2026-03-15", _WRING),
    ("us-east-1", "ml.p4d.24xlarge"): Price(37.69, "us-east-1", "2026-03-15", _WRING),
    **{("us-east-1", name): Price(usd, "us-east-1", _FMBENCH_DATE, _FMBENCH)
       for name, usd in _FMBENCH_USD.items()},
    **{("us-east-1", name): Price(usd, "us-east-1", _BULK_DATE, _BULK.format(name=name))
       for name, usd in _BULK_USD.items()},
    **{("us-east-1", name): Price(usd, "us-east-1", _QUERY_DATE, _QUERY)
       for name, usd in _QUERY_USD.items()},
}


# /2 records when each row was read: a merged file holds rows of several fetches. /1 files
# (one fetched_at for every row) are still read.
PRICE_FILE_FORMAT = "lmikit-prices/2"
_FORMATS = ("lmikit-prices/1", PRICE_FILE_FORMAT)
MAX_PRICE_FILE_BYTES = 8 * 1024 * 1024
MAX_PRICE_ROWS = 20_000  # every SageMaker instance type in every region is a few thousand
MAX_USD_PER_HOUR = 10_000.0  # the dearest SageMaker instance lists near $100 an hour
REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")
INSTANCE_RE = re.compile(r"^ml\.[a-z0-9-]{1,32}\.[a-z0-9]{1,32}$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIMESTAMP_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$")
# a price file's dates may run this far ahead of this machine's clock (time zones, skew)
_CLOCK_SLACK = dt.timedelta(days=1)


@dataclass(frozen=True)
class PriceTable:
    """Prices read from AWS's price list (``lmikit prices fetch``), saved as a price file.

    ``rows`` maps (region, instance type) to a :class:`Price` with the SKU and usage type it
    came from and when it was read; ``fetched_at`` is when the newest of them was (UTC).
    """

    rows: Mapping[tuple[str, str], Price] = field(default_factory=dict)
    fetched_at: str = ""

    def get(self, instance_type: str, region: str) -> Price | None:
        return self.rows.get((region, ml_name(instance_type)))

    def merged(self, other: PriceTable) -> PriceTable:
        """This table with ``other``'s rows added (``other`` wins where both list one); each
        row keeps the time it was read."""
        return PriceTable({**self.rows, **other.rows}, max(self.fetched_at, other.fetched_at))

    def to_dict(self) -> dict[str, Any]:
        rows = [{"region": region, "instance_type": instance, "usd_per_hour": price.usd,
                 "as_of": price.as_of, "sku": price.sku, "usage_type": price.usage_type,
                 "fetched_at": price.fetched_at or self.fetched_at}
                for (region, instance), price in sorted(self.rows.items())]
        return {"format": PRICE_FILE_FORMAT, "source": PRICE_LIST_SOURCE,
                "fetched_at": self.fetched_at, "prices": rows}

    def save(self, path: str | Path) -> None:
        """Write the price file (JSON) atomically: a reader never sees half of it. It keeps
        the mode of the file it replaces; a new one gets the mode ``open()`` would give it
        (0666 less the umask), not the private 0600 of a ``mkstemp`` file."""
        import os
        import secrets

        target = Path(path)
        text = json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n"
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            if target.exists():
                tmp.chmod(target.stat().st_mode & 0o7777)
            tmp.replace(target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


# What a fetched price cites: AWS's own list, read through its query API.
PRICE_LIST_SOURCE = ("AWS Price List Query API, service AmazonSageMaker, product family "
                     "'ML Instance', platoinstancetype 'Hosting', on-demand")


def fetched_price(region: str, instance_type: str, usd: float, as_of: str, sku: str,
                  usage_type: str, fetched_at: str) -> Price:
    """The :class:`Price` of one price-list row, its source naming the SKU and usage type."""
    read = fetched_at[:10] or "an unknown date"
    return Price(usd, region, as_of, f"{PRICE_LIST_SOURCE}: SKU {sku or '?'}, usage type "
                                     f"{usage_type or '?'}, read {read}", sku, usage_type,
                 fetched_at)


def load_prices(path: str | Path) -> PriceTable:
    """Read a price file written by ``lmikit prices fetch``; every problem names the row,
    the field, the value and what is valid (:class:`lmikit.errors.CatalogError`)."""
    from lmikit._files import FileRefused, read_limited
    from lmikit.errors import CatalogError, safe_repr

    what = f"price file {str(path)!r}"
    try:
        raw = read_limited(path, MAX_PRICE_FILE_BYTES, what)
    except FileRefused as exc:
        raise CatalogError(str(exc)) from exc
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise CatalogError(f"{what} is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise CatalogError(f"{what} holds a JSON {type(data).__name__}; expected an object "
                           f"with format {PRICE_FILE_FORMAT!r} (write one with `lmikit prices "
                           "fetch`)")
    if data.get("format") not in _FORMATS:
        raise CatalogError(f"{what}: format is {safe_repr(data.get('format'))}; expected "
                           f"{PRICE_FILE_FORMAT!r} (write one with `lmikit prices fetch`)")
    fetched_at = data.get("fetched_at")
    if not _is_timestamp(fetched_at):
        raise CatalogError(f"{what}: fetched_at is {safe_repr(fetched_at)}; expected "
                           f"{_TIMESTAMP}")
    per_row = data["format"] != "lmikit-prices/1"
    rows = data.get("prices")
    if not isinstance(rows, list):
        raise CatalogError(f"{what}: prices is {safe_repr(rows)}; expected a list of rows")
    if len(rows) > MAX_PRICE_ROWS:
        raise CatalogError(f"{what} has {len(rows):,} price rows; at most "
                           f"{MAX_PRICE_ROWS:,} are read")
    table: dict[tuple[str, str], Price] = {}
    for i, row in enumerate(rows):
        price = _row(row, f"{what}: prices[{i}]", None if per_row else fetched_at)
        key = (price.region, row["instance_type"])
        if key in table:
            raise CatalogError(f"{what}: prices[{i}] lists {key[1]} in {key[0]} a second "
                               "time; each region and instance type appears once")
        table[key] = price
    return PriceTable(table, fetched_at)


def _row(row: object, where: str, fetched_at: str | None) -> Price:
    """One row; ``fetched_at``: the file's, for a /1 file whose rows carry none."""
    from lmikit.errors import CatalogError, safe_repr

    if not isinstance(row, dict):
        raise CatalogError(f"{where} is {safe_repr(row)}; expected an object")
    latest = (dt.date.today() + _CLOCK_SLACK).isoformat()
    checks: list[tuple[str, Any, str]] = [
        ("region", lambda v: isinstance(v, str) and REGION_RE.match(v),
         "an AWS region such as 'eu-west-1'"),
        ("instance_type", lambda v: isinstance(v, str) and INSTANCE_RE.match(v),
         "a SageMaker instance type such as 'ml.g5.xlarge'"),
        ("usd_per_hour", is_hourly_usd,
         f"a number of US dollars above 0 and at most {MAX_USD_PER_HOUR:,.0f}"),
        ("as_of", lambda v: isinstance(v, str) and _is_date(v) and v <= latest,
         f"a date such as '2026-11-01', no later than {latest}"),
        ("sku", lambda v: isinstance(v, str) and len(v) <= 64, "a string (the price list SKU)"),
        ("usage_type", lambda v: isinstance(v, str) and len(v) <= 128,
         "a string (the price list usage type)"),
    ]
    if fetched_at is None:
        checks.append(("fetched_at", _is_timestamp, _TIMESTAMP))
    for name, ok, valid in checks:
        value = row.get(name)
        if not ok(value):
            raise CatalogError(f"{where}.{name} is {safe_repr(value)}; expected {valid}")
    unknown = sorted(set(row) - {name for name, _, _ in checks})
    if unknown:
        named = ", ".join(safe_repr(name) for name in unknown[:5])
        raise CatalogError(f"{where} has unknown field(s) {named}; valid: "
                           f"{', '.join(name for name, _, _ in checks)}")
    return fetched_price(row["region"], row["instance_type"], float(row["usd_per_hour"]),
                         row["as_of"], row["sku"], row["usage_type"],
                         row["fetched_at"] if fetched_at is None else fetched_at)


def is_hourly_usd(value: object) -> bool:
    """A price per instance-hour lmikit takes: a number above 0 and at most
    ``MAX_USD_PER_HOUR`` (its bounds are checked before ``isfinite``, which 10**400 breaks)."""
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and 0 < value <= MAX_USD_PER_HOUR and math.isfinite(value))


def _is_date(text: str) -> bool:
    if not _DATE_RE.match(text):
        return False
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return True


_TIMESTAMP = "a UTC time such as '2026-11-26T05:40:00Z', not in the future"


def _is_timestamp(value: object) -> TypeGuard[str]:
    """A UTC time written as ``lmikit prices fetch`` writes it, not after now."""
    if not isinstance(value, str) or not _TIMESTAMP_RE.match(value):
        return False
    try:
        when = dt.datetime.fromisoformat(value[:-1]).replace(tzinfo=dt.UTC)
    except ValueError:
        return False
    return when <= dt.datetime.now(dt.UTC) + _CLOCK_SLACK


def hourly_price(instance_type: str, region: str,
                 table: PriceTable | None = None) -> Price | None:
    """The on-demand price of ``instance_type`` in ``region``: from ``table`` (a price file)
    when it lists one, else from lmikit's dated table, else None."""
    if table is not None:
        found = table.get(instance_type, region)
        if found is not None:
            return found
    return PRICES.get((region, ml_name(instance_type)))


def price_or_reason(instance_type: str, region: str, hourly_price_usd: float | None = None,
                    table: PriceTable | None = None) -> Price | str:
    """The price a cost is computed from: ``hourly_price_usd`` when the caller gives one,
    else :func:`hourly_price`; when there is none, the sentence saying so."""
    if hourly_price_usd is not None:
        return Price(hourly_price_usd, region, "", "given by the caller")
    found = hourly_price(instance_type, region, table)
    if found is not None:
        return found
    from lmikit.catalog._offers import elsewhere, offered

    name = ml_name(instance_type)
    if offered(region, name) is False:  # AWS lists no on-demand hosting price to fetch
        return (f"no on-demand price: {name} has no on-demand SageMaker hosting in {region} "
                f"({elsewhere(region, name)}); capacity reserved by a training plan is "
                "priced by the plan")
    return (f"no list price for {instance_type} in {region} in lmikit's table"
            + ("" if table is None else " or the price file")
            + "; `lmikit prices fetch` reads it from AWS")


def usd_text(usd: float, digits: int = 3) -> str:
    """A small cost in dollars with ``digits`` significant figures and at least four decimals,
    so that costs per 1K tokens that differ are printed differently.

    >>> usd_text(0.0000561), usd_text(0.01234567), usd_text(2.5), usd_text(0.0)
    ('$0.0000561', '$0.0123', '$2.5000', '$0.0000')
    """
    return f"${usd:.{usd_decimals(usd, digits)}f}"


def usd_decimals(usd: float, digits: int = 3) -> int:
    """The decimals that print ``usd`` to ``digits`` significant figures, never fewer than
    four (what :func:`usd_text` prints; a dashboard panel takes the number).

    >>> usd_decimals(0.0000561), usd_decimals(0.0123), usd_decimals(2.5), usd_decimals(0.0)
    (7, 4, 4, 4)
    """
    if usd <= 0 or not math.isfinite(usd):
        return 4
    return max(4, digits - 1 - math.floor(math.log10(usd)))


def listed(table: PriceTable | None = None, regions: Iterable[str] | None = None,
           ) -> list[tuple[str, str, Price]]:
    """Every (region, instance type, price) lmikit would use, the price file's first."""
    rows = dict(PRICES)
    if table is not None:
        rows.update(table.rows)
    wanted = set(regions) if regions else None
    return [(region, instance, price) for (region, instance), price in sorted(rows.items())
            if wanted is None or region in wanted]
