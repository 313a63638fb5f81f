"""Current SageMaker hosting prices, read from AWS's own price list.

lmikit's shipped table (:mod:`lmikit.catalog`) is dated and covers only the types and
region a public source lists. :func:`fetch_hosting_prices` reads the on-demand price of each
instance type for real-time endpoints in any region from the AWS Price List Query API
(``pricing:GetProducts``) and returns a :class:`~lmikit.catalog.PriceTable` that
``lmikit prices fetch`` saves as a price file.

The instance type is read from the usage type, so a product for something else (storage,
data transfer, another feature) never passes for an instance; a type whose on-demand hourly
prices disagree is reported, not guessed. What the API and the product documents look like,
with sources: the fact rows below.

>>> import boto3
>>> from lmikit.testing import FakePriceList
>>> fake = FakePriceList()
>>> sku = fake.add_hosting_price("eu-west-1", "ml.g5.xlarge", 1.58)
>>> session = fake.install(boto3.Session(region_name="eu-west-1",
...     aws_access_key_id="testing", aws_secret_access_key="testing"))
>>> got = fetch_hosting_prices(["eu-west-1"], ["ml.g5.xlarge"], session=session)
>>> got.table.get("ml.g5.xlarge", "eu-west-1").usd
1.58
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lmikit.catalog._instances import ml_name
from lmikit.catalog._prices import (
    INSTANCE_RE,
    REGION_RE,
    Price,
    PriceTable,
    _is_date,
    fetched_price,
    is_hourly_usd,
)
from lmikit.errors import CatalogError, safe_repr

# SageMaker's products: service code AmazonSageMaker; a real-time endpoint's instance is
# product family "ML Instance", platoinstancetype "Hosting", regionCode its region, and usage
# type "<region prefix>-Host:<instance type>" (USE1-Host:ml.m5.xlarge), as AWS bills it (Cost
# and Usage Report usage types); each product is a JSON string with product.attributes,
# terms.OnDemand and publicationDate (format aws_v1)
SERVICE_CODE = "AmazonSageMaker"
# the Query API's endpoints in the aws partition (botocore data/endpoints.json, api.pricing);
# each answers for every region
API_REGIONS = ("us-east-1", "eu-central-1", "ap-south-1")
# GetProducts: at most 50 filters (TERM_MATCH, EQUALS, CONTAINS, ANY_OF, NONE_OF) and 100
# products a page (botocore's pricing model: Filters max 50, GetProductsMaxResults max 100)
PAGE_SIZE = 100
# A region lists one Hosting product per instance type it offers (a few hundred); a listing
# that runs past this many pages is not the price list lmikit was written against.
MAX_PAGES = 100
_HOST_USAGE = re.compile(r"^(?:[A-Z0-9]{2,8}-)?Host:(ml\.[a-z0-9-]+\.[a-z0-9]+)$")
_HOURLY_UNITS = frozenset({"hrs", "hours", "hour", "hr"})


@dataclass(frozen=True)
class Fetched:
    """What a price-list read found: the table, and what it could not price, per region."""

    table: PriceTable
    missing: dict[str, list[str]] = field(default_factory=dict)  # region -> types not offered
    conflicts: list[str] = field(default_factory=list)  # types with disagreeing prices
    products_read: int = 0


def fetch_hosting_prices(regions: Sequence[str], instance_types: Iterable[str] | None = None,
                         *, session: Any = None, api_region: str = "us-east-1",
                         progress: Callable[[str, int], None] | None = None,
                         now: Callable[[], dt.datetime] | None = None) -> Fetched:
    """On-demand $/hour of each of ``instance_types`` (default: every type in lmikit's
    catalog) for real-time endpoints in each of ``regions``, from the AWS price list.

    ``progress(region, products_read)`` is called after each page. AWS errors arrive as
    :class:`lmikit.errors.AwsError` (the role needs ``pricing:GetProducts``).
    """
    from lmikit.aws._clients import Clients
    from lmikit.aws._errors import call

    wanted = _instance_types(instance_types)
    regions = _regions(regions, session)
    if api_region not in API_REGIONS:
        raise CatalogError(f"api_region is {safe_repr(api_region)}; the AWS Price List Query "
                           f"API is served from {', '.join(API_REGIONS)}")
    client = Clients(session, region=api_region).client("pricing")
    fetched_at = (now or (lambda: dt.datetime.now(dt.UTC)))().strftime("%Y-%m-%dT%H:%M:%SZ")
    rows: dict[tuple[str, str], Price] = {}
    missing: dict[str, list[str]] = {}
    conflicts: list[str] = []
    read = 0
    for region in regions:
        found: dict[str, list[tuple[float, str, str, str]]] = {}
        token: str | None = None
        for _ in range(MAX_PAGES):
            kwargs: dict[str, Any] = {"ServiceCode": SERVICE_CODE, "FormatVersion": "aws_v1",
                                      "MaxResults": PAGE_SIZE, "Filters": _filters(region)}
            if token:
                kwargs["NextToken"] = token
            answer = call(client, "get_products", **kwargs)
            for item in answer.get("PriceList") or []:
                read += 1
                offer = _offer(item, region, fetched_at[:10])
                if offer is not None and offer[0] in wanted:
                    found.setdefault(offer[0], []).append(offer[1:])
            if progress is not None:
                progress(region, read)
            token = answer.get("NextToken")
            if not token:
                break
        else:
            raise CatalogError(
                f"the AWS price list returned more than {MAX_PAGES * PAGE_SIZE:,} SageMaker "
                f"Hosting products for {region}; lmikit stopped reading")
        for instance in sorted(wanted):
            offers = found.get(instance)
            if not offers:
                missing.setdefault(region, []).append(instance)
                continue
            usds = sorted({usd for usd, *_ in offers})
            if len(usds) > 1:
                conflicts.append(f"{instance} in {region}: {len(offers)} Hosting products "
                                 f"with hourly prices {', '.join(f'${u:g}' for u in usds)}")
                continue
            usd, as_of, sku, usage = offers[0]
            rows[(region, instance)] = fetched_price(region, instance, usd, as_of, sku, usage,
                                                     fetched_at)
    return Fetched(PriceTable(rows, fetched_at), missing, conflicts, read)


def _filters(region: str) -> list[dict[str, str]]:
    return [{"Type": "TERM_MATCH", "Field": field_, "Value": value} for field_, value in (
        ("productFamily", "ML Instance"), ("regionCode", region),
        ("platoinstancetype", "Hosting"))]


def _offer(item: Any, region: str, read_on: str) -> tuple[str, float, str, str, str] | None:
    """(instance type, $/hour, as-of date, SKU, usage type) of one Hosting product, or None
    for a product that is not an instance of a real-time endpoint in ``region``. The as-of
    date is the product's ``publicationDate``; without a readable one, ``read_on`` (the
    date lmikit read it), so that a price always has a date."""
    try:
        data = json.loads(item) if isinstance(item, str) else item
        product = data["product"]
        attributes = product["attributes"]
        if not isinstance(product, dict) or not isinstance(attributes, dict):
            raise TypeError("a product and its attributes are JSON objects")
        sku = str(product.get("sku", ""))
        usage = str(attributes.get("usagetype", ""))
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise CatalogError(f"the AWS price list answered a product lmikit cannot read "
                           f"({type(exc).__name__}: {safe_repr(str(exc))})") from exc
    match = _HOST_USAGE.match(usage)
    if (not match or attributes.get("regionCode") != region
            or attributes.get("platoinstancetype") != "Hosting"):
        return None
    instance = match.group(1)
    usds = set()
    try:
        for term in (data.get("terms", {}).get("OnDemand") or {}).values():
            for dim in (term.get("priceDimensions") or {}).values():
                if str(dim.get("unit", "")).lower() in _HOURLY_UNITS:
                    usds.add(float(dim["pricePerUnit"]["USD"]))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise CatalogError(f"the AWS price list's on-demand terms for {instance} in {region} "
                           f"(SKU {sku}) cannot be read ({type(exc).__name__})") from exc
    usds = {u for u in usds if is_hourly_usd(u)}
    if len(usds) != 1:
        return None
    published = str(data.get("publicationDate", ""))[:10]
    if not _is_date(published):
        published = read_on
    return instance, usds.pop(), min(published, read_on), sku, usage


def _instance_types(given: Iterable[str] | None) -> set[str]:
    if given is None:
        from lmikit.catalog._instances import INSTANCES

        return set(INSTANCES)
    out = set()
    for name in given:
        key = ml_name(name)
        if not INSTANCE_RE.match(key):
            raise CatalogError(f"instance type {safe_repr(name)} is not a SageMaker instance "
                               "type; expected a name such as 'ml.g5.xlarge'")
        out.add(key)
    if not out:
        raise CatalogError("no instance type to price")
    return out


def _regions(given: Sequence[str], session: Any) -> list[str]:
    """The regions asked for, each checked against the regions botocore knows SageMaker in."""
    out = list(dict.fromkeys(given))
    if not out:
        raise CatalogError("no region to price; name one, e.g. us-east-1")
    check_regions(out, session)
    return out


def check_regions(regions: Iterable[str], session: Any = None) -> None:
    """Refuse a name that is not a region botocore's endpoint data lists SageMaker in (read
    from the installed botocore: no call to AWS)."""
    if session is None:
        import boto3

        session = boto3.Session()
    known = set(session.get_available_regions("sagemaker"))
    for region in regions:
        if not REGION_RE.match(region) or region not in known:
            raise CatalogError(f"region {safe_repr(region)} is not an AWS region SageMaker is "
                               f"offered in; valid: {', '.join(sorted(known))}")
