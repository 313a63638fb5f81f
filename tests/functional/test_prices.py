"""``lmikit prices`` and the price list it reads: the strict fake of the AWS Price List Query
API, the price file, and where fetched prices are used (simulate, the Grafana cost panel)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from click.testing import CliRunner, Result

from lmikit.catalog._price_list import MAX_PAGES, PAGE_SIZE, fetch_hosting_prices
from lmikit.catalog._prices import (
    MAX_PRICE_FILE_BYTES,
    PRICE_LIST_SOURCE,
    PRICES,
    PriceTable,
    hourly_price,
    load_prices,
)
from lmikit.cli import main
from lmikit.errors import AwsError, CatalogError
from lmikit.testing import FakePriceList

GETPRODUCTS_FILTERS = [
    {"Type": "TERM_MATCH", "Field": "productFamily", "Value": "ML Instance"},
    {"Type": "TERM_MATCH", "Field": "regionCode", "Value": "eu-west-1"},
    {"Type": "TERM_MATCH", "Field": "platoinstancetype", "Value": "Hosting"}]


@pytest.fixture
def fake() -> FakePriceList:
    fake = FakePriceList(publication="2026-11-20T12:00:00Z")
    fake.add_hosting_price("eu-west-1", "ml.g5.xlarge", 1.58)
    fake.add_hosting_price("eu-west-1", "ml.g6e.2xlarge", 3.01)
    fake.add_hosting_price("us-west-2", "ml.g5.xlarge", 1.41)
    fake.add_hosting_price("eu-west-1", "ml.g5.4xlarge", 2.2)
    return fake


@pytest.fixture
def session(fake: FakePriceList) -> Any:
    return fake.install(boto3.Session(region_name="eu-west-1", aws_access_key_id="t",
                                      aws_secret_access_key="t"))


def pricing(session: Any, region: str = "us-east-1") -> Any:
    return session.client("pricing", region_name=region)


# --- the fake answers as the service does ------------------------------------------------

def test_fake_serves_only_from_the_price_list_api_regions(session: Any) -> None:
    for region in ("us-east-1", "eu-central-1", "ap-south-1"):
        assert pricing(session, region).get_products(ServiceCode="AmazonSageMaker")["PriceList"]
    with pytest.raises(EndpointConnectionError):
        pricing(session, "eu-west-1").get_products(ServiceCode="AmazonSageMaker")


def test_fake_refuses_what_the_service_model_refuses(session: Any) -> None:
    with pytest.raises(ClientError, match="MaxResults.*100"):
        pricing(session).get_products(ServiceCode="AmazonSageMaker", MaxResults=101)
    with pytest.raises(ClientError, match="NotFoundException"):
        pricing(session).get_products(ServiceCode="AmazonSageMakerX")
    with pytest.raises(ClientError, match="InvalidParameterException"):
        pricing(session).get_products(ServiceCode="AmazonSageMaker", FormatVersion="aws_v2")
    with pytest.raises(ClientError, match="InvalidNextTokenException"):
        pricing(session).get_products(ServiceCode="AmazonSageMaker", NextToken="made-up")


def test_fake_filters_as_the_api_reference_describes(fake: FakePriceList,
                                                     session: Any) -> None:
    def regions(kind: str, value: str) -> list[str]:
        page = pricing(session).get_products(ServiceCode="AmazonSageMaker", Filters=[
            {"Type": kind, "Field": "regionCode", "Value": value}])
        return sorted(json.loads(p)["product"]["attributes"]["regionCode"]
                      for p in page["PriceList"])

    assert regions("TERM_MATCH", "eu-west-1") == ["eu-west-1"] * 3
    assert regions("EQUALS", "eu-west") == []
    assert regions("CONTAINS", "west") == ["eu-west-1"] * 3 + ["us-west-2"]
    assert regions("ANY_OF", "us-west-2,ap-south-1") == ["us-west-2"]
    assert regions("NONE_OF", "eu-west-1") == ["us-west-2"]


def test_fake_pages_hold_at_most_max_results_and_tokens_carry_on(fake: FakePriceList,
                                                                  session: Any) -> None:
    client = pricing(session)
    first = client.get_products(ServiceCode="AmazonSageMaker", MaxResults=3)
    assert len(first["PriceList"]) == 3
    rest = client.get_products(ServiceCode="AmazonSageMaker", MaxResults=3,
                               NextToken=first["NextToken"])
    assert len(rest["PriceList"]) == 1 and "NextToken" not in rest
    with pytest.raises(ClientError, match="InvalidNextTokenException"):  # other filters
        client.get_products(ServiceCode="AmazonSageMaker", NextToken=first["NextToken"],
                            Filters=GETPRODUCTS_FILTERS)


# --- fetching ----------------------------------------------------------------------------

def test_fetch_reads_each_types_hosting_price_with_its_sku(fake: FakePriceList,
                                                           session: Any) -> None:
    got = fetch_hosting_prices(["eu-west-1"], ["ml.g5.xlarge", "g6e.2xlarge"],
                               session=session)
    price = got.table.get("ml.g5.xlarge", "eu-west-1")
    assert price is not None and price.usd == 1.58
    assert price.as_of == "2026-11-20"  # the price list's publication date
    assert price.source.startswith(PRICE_LIST_SOURCE)
    assert "usage type EUW1-Host:ml.g5.xlarge" in price.source
    assert got.table.get("ml.g6e.2xlarge", "eu-west-1").usd == 3.01
    assert got.missing == {} and got.conflicts == []
    (call,) = fake.calls
    assert call.region == "us-east-1"
    assert call.params["Filters"] == GETPRODUCTS_FILTERS
    assert call.params["ServiceCode"] == "AmazonSageMaker"


def test_fetch_never_takes_another_features_price_for_hosting(fake: FakePriceList,
                                                               session: Any) -> None:
    fake.add_hosting_price("eu-west-1", "ml.g5.2xlarge", 9.99, component="Training",
                           usage="Train")
    fake.add_product("AmazonSageMaker", "ML Instance", {
        "regionCode": "eu-west-1", "platoinstancetype": "Hosting",
        "usagetype": "EUW1-Host:VolumeUsage.gp2"}, 0.14, unit="GB-Mo")
    fake.add_product("AmazonSageMaker", "ML Instance", {  # priced per GB, not per hour
        "regionCode": "eu-west-1", "platoinstancetype": "Hosting",
        "usagetype": "EUW1-Host:ml.g5.8xlarge"}, 0.02, unit="GB")
    got = fetch_hosting_prices(["eu-west-1"], ["ml.g5.2xlarge", "ml.g5.8xlarge"],
                               session=session)
    assert dict(got.table.rows) == {}
    assert got.missing == {"eu-west-1": ["ml.g5.2xlarge", "ml.g5.8xlarge"]}


def test_fetch_reports_disagreeing_prices_instead_of_choosing(fake: FakePriceList,
                                                              session: Any) -> None:
    fake.add_product("AmazonSageMaker", "ML Instance", {
        "regionCode": "eu-west-1", "platoinstancetype": "Hosting",
        "usagetype": "EUW1-Host:ml.g5.xlarge", "note": "second SKU"}, 1.99)
    got = fetch_hosting_prices(["eu-west-1"], ["ml.g5.xlarge"], session=session)
    assert got.table.get("ml.g5.xlarge", "eu-west-1") is None
    assert got.conflicts == ["ml.g5.xlarge in eu-west-1: 2 Hosting products with hourly "
                             "prices $1.58, $1.99"]


def test_fetch_reads_every_page(fake: FakePriceList, session: Any) -> None:
    for i in range(2 * PAGE_SIZE + 30):
        fake.add_hosting_price("eu-west-1", f"ml.c{i}.xlarge", 0.2)
    got = fetch_hosting_prices(["eu-west-1"], ["ml.g5.xlarge", f"ml.c{2 * PAGE_SIZE}.xlarge"],
                               session=session)
    assert got.products_read == 2 * PAGE_SIZE + 33
    assert len(got.table.rows) == 2
    assert [("NextToken" in c.params) for c in fake.calls] == [False, True, True]


def test_fetch_stops_at_the_page_limit(monkeypatch: pytest.MonkeyPatch, fake: FakePriceList,
                                       session: Any) -> None:
    monkeypatch.setattr("lmikit.catalog._price_list.MAX_PAGES", 2)
    for i in range(2 * PAGE_SIZE):
        fake.add_hosting_price("eu-west-1", f"ml.c{i}.xlarge", 0.2)
    with pytest.raises(CatalogError, match="more than 200 SageMaker Hosting products for "
                                           "eu-west-1"):
        fetch_hosting_prices(["eu-west-1"], ["ml.g5.xlarge"], session=session)
    assert len(fake.calls) == 2
    assert MAX_PAGES * PAGE_SIZE >= 10_000


@pytest.mark.slow
def test_fetch_rides_out_throttling_and_names_a_denial(fake: FakePriceList,
                                                       session: Any) -> None:
    fake.inject("throttle", times=2)
    got = fetch_hosting_prices(["eu-west-1"], ["ml.g5.xlarge"], session=session)
    assert got.table.get("ml.g5.xlarge", "eu-west-1") is not None
    assert [c.status for c in fake.calls] == [400, 400, 200]
    fake.inject("denied")
    with pytest.raises(AwsError, match="GetProducts failed: AccessDeniedException: .*"
                                       "pricing:GetProducts"):
        fetch_hosting_prices(["eu-west-1"], ["ml.g5.xlarge"], session=session)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"regions": ["eu-west-9"]}, "region 'eu-west-9' is not an AWS region SageMaker is "
                                 "offered in; valid: .*eu-west-1"),
    ({"regions": []}, "no region to price"),
    ({"instance_types": ["g5 xlarge"]}, "instance type 'g5 xlarge' is not a SageMaker "
                                        "instance type"),
    ({"api_region": "eu-west-1"}, "served from us-east-1, eu-central-1, ap-south-1"),
])
def test_fetch_refuses_bad_arguments_before_calling_aws(fake: FakePriceList, session: Any,
                                                        kwargs: dict[str, Any],
                                                        message: str) -> None:
    args: dict[str, Any] = {"regions": ["eu-west-1"], "instance_types": ["ml.g5.xlarge"],
                            **kwargs}
    with pytest.raises(CatalogError, match=message):
        fetch_hosting_prices(args.pop("regions"), args.pop("instance_types"),
                             session=session, **args)
    assert fake.calls == []


# --- the price file ------------------------------------------------------------------------

def test_price_file_round_trips(fake: FakePriceList, session: Any, tmp_path: Path) -> None:
    table = fetch_hosting_prices(["eu-west-1", "us-west-2"], ["ml.g5.xlarge"],
                                 session=session).table
    table.save(tmp_path / "p.json")
    back = load_prices(tmp_path / "p.json")
    assert back == table
    assert [f.name for f in tmp_path.iterdir()] == ["p.json"]  # no temporary file left


def _file(tmp_path: Path, rows: list[dict[str, Any]], **top: Any) -> Path:
    data = {"format": "lmikit-prices/1", "fetched_at": "2026-11-26T05:00:00Z",
            "prices": rows, **top}
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(data))
    return path


ROW = {"region": "eu-west-1", "instance_type": "ml.g5.xlarge", "usd_per_hour": 1.58,
       "as_of": "2026-11-20", "sku": "ABC", "usage_type": "EUW1-Host:ml.g5.xlarge"}


@pytest.mark.parametrize(("change", "message"), [
    ({"usd_per_hour": 0}, r"prices\[0\].usd_per_hour is 0; expected a number of US dollars "
                          "above 0"),
    ({"usd_per_hour": float("inf")}, r"usd_per_hour is inf"),
    ({"usd_per_hour": True}, r"usd_per_hour is True"),
    # past a float's range: math.isfinite raised OverflowError, a traceback
    ({"usd_per_hour": 10**400}, r"usd_per_hour is <an integer of about 401 digits>"),
    ({"region": "Europe"}, r"prices\[0\].region is 'Europe'; expected an AWS region"),
    ({"instance_type": "g5.xlarge"}, r"instance_type is 'g5.xlarge'; expected a SageMaker "
                                     "instance type"),
    ({"as_of": "2026-02-30"}, r"as_of is '2026-02-30'; expected a date"),
    ({"colour": "red"}, r"unknown field\(s\) 'colour'"),
])
def test_price_file_errors_name_the_row_field_and_value(tmp_path: Path,
                                                        change: dict[str, Any],
                                                        message: str) -> None:
    with pytest.raises(CatalogError, match=message):
        load_prices(_file(tmp_path, [{**ROW, **change}]))


def test_price_file_refuses_a_repeated_row_and_a_wrong_format(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"prices\[1\] lists ml.g5.xlarge in eu-west-1 a "
                                           "second time"):
        load_prices(_file(tmp_path, [ROW, ROW]))
    with pytest.raises(CatalogError, match="format is 'v0'; expected 'lmikit-prices/2'"):
        load_prices(_file(tmp_path, [ROW], format="v0"))
    with pytest.raises(CatalogError, match="fetched_at is 'yesterday'"):
        load_prices(_file(tmp_path, [ROW], fetched_at="yesterday"))


@pytest.mark.parametrize("when", ["2026-11-26T05:00:00+05:00Z", "2026-11-26Z",
                                  "2026-11-26 05:00:00Z", "9999-12-31T23:59:59Z"])
def test_price_file_times_are_utc_and_not_in_the_future(tmp_path: Path, when: str) -> None:
    # an offset before the Z, a bare date or a space had read as a local or unknown time
    with pytest.raises(CatalogError, match=f"fetched_at is '{re.escape(when)}'; expected a "
                                           "UTC time such as '2026-11-26T05:40:00Z', not in "
                                           "the future"):
        load_prices(_file(tmp_path, [ROW], fetched_at=when))


def test_price_file_dates_are_not_in_the_future(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"prices\[0\].as_of is '2999-01-01'; expected a "
                                           "date such as '2026-11-01', no later than "):
        load_prices(_file(tmp_path, [{**ROW, "as_of": "2999-01-01"}]))


def test_an_unknown_field_is_named_in_bounded_space(tmp_path: Path) -> None:
    with pytest.raises(CatalogError) as err:
        load_prices(_file(tmp_path, [{**ROW, "x" * 7_000_000: 1}]))
    assert "unknown field(s) 'xxx" in str(err.value) and len(str(err.value)) < 1_000


def test_a_price_file_records_when_each_row_was_read(tmp_path: Path) -> None:
    """Format 2 carries each row's read time; a format 1 file's rows take the file's."""
    old = load_prices(_file(tmp_path, [ROW], fetched_at="2025-01-01T00:00:00Z"))
    assert old.get("ml.g5.xlarge", "eu-west-1").fetched_at == "2025-01-01T00:00:00Z"
    data = old.to_dict()
    assert data["format"] == "lmikit-prices/2"
    assert data["prices"][0]["fetched_at"] == "2025-01-01T00:00:00Z"
    data["prices"][0].pop("fetched_at")
    again = tmp_path / "again.json"
    again.write_text(json.dumps(data))
    with pytest.raises(CatalogError, match=r"prices\[0\].fetched_at is None; expected a UTC"):
        load_prices(again)


def test_fetching_into_a_file_keeps_the_read_date_of_rows_it_did_not_fetch(
        cli: Any, tmp_path: Path) -> None:
    # the file's newest fetch time had been given to every row: old prices looked fresh
    path = _file(tmp_path, [{**ROW, "region": "us-west-2", "usage_type":
                             "USW2-Host:ml.g5.xlarge"}], fetched_at="2025-01-01T00:00:00Z")
    r = cli("prices", "fetch", "--region", "eu-west-1", "--instance", "ml.g5.xlarge", "-o",
            str(path))
    assert r.exit_code == 0, r.output
    table = load_prices(path)
    kept, new = table.get("ml.g5.xlarge", "us-west-2"), table.get("ml.g5.xlarge", "eu-west-1")
    assert kept.source.endswith("read 2025-01-01") and kept.usd == 1.58
    assert new.fetched_at > "2026" and new.source.endswith(f"read {new.fetched_at[:10]}")
    assert table.fetched_at == new.fetched_at
    shown = cli("prices", "show", "--prices", str(path), "--region", "us-west-2")
    assert "read 2025-01-01" in shown.output.replace("\n", "")


def test_a_price_file_keeps_its_mode_and_a_new_one_follows_the_umask(tmp_path: Path) -> None:
    # it was always written 0600 (a temporary file's mode), shutting out a team's readers
    table = load_prices(_file(tmp_path, [ROW]))
    umask = os.umask(0o022)
    try:
        table.save(tmp_path / "new.json")
        assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o644
        shared = tmp_path / "shared.json"
        shared.write_text("{}")
        shared.chmod(0o664)
        table.save(shared)
        assert shared.stat().st_mode & 0o777 == 0o664
    finally:
        os.umask(umask)
    assert load_prices(shared).rows == table.rows
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.json", "prices.json",
                                                          "shared.json"]


def test_a_product_the_price_list_garbles_is_refused_or_dated_as_read() -> None:
    from lmikit.catalog._price_list import _offer

    fake = FakePriceList(publication="2026-11-20T12:00:00Z")
    fake.add_hosting_price("eu-west-1", "ml.g5.xlarge", 1.58)
    product = fake.products[0]
    assert _offer(product, "eu-west-1", "2026-11-27")[1:3] == (1.58, "2026-11-20")
    # no publicationDate, or one after the day it was read: the read date, never ''
    # (a price file with an empty as_of could not be read back)
    for published in (None, "yesterday", "2027-06-01T00:00:00Z"):
        changed = {k: v for k, v in product.items() if k != "publicationDate"}
        if published is not None:
            changed["publicationDate"] = published
        assert _offer(changed, "eu-west-1", "2026-11-27")[2] == "2026-11-27"
    # attributes that are not an object had raised AttributeError, a traceback
    for attributes in (["regionCode", "eu-west-1"], "eu-west-1"):
        garbled = {**product, "product": {**product["product"], "attributes": attributes}}
        with pytest.raises(CatalogError, match="the AWS price list answered a product lmikit "
                                               "cannot read"):
            _offer(json.dumps(garbled), "eu-west-1", "2026-11-27")


def test_price_file_is_read_in_bounded_memory(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as out:
        out.truncate(MAX_PRICE_FILE_BYTES + 1)
    with pytest.raises(CatalogError, match="the limit is 8,388,608"):
        load_prices(big)
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo")
        with pytest.raises(CatalogError, match="not a regular file"):
            load_prices(tmp_path / "fifo")


def test_a_price_file_comes_before_the_shipped_table(tmp_path: Path) -> None:
    shipped = PRICES[("us-east-1", "ml.g5.2xlarge")]
    mine = load_prices(_file(tmp_path, [{**ROW, "region": "us-east-1",
                                         "instance_type": "ml.g5.2xlarge", "usd_per_hour": 2.0}]))
    assert hourly_price("ml.g5.2xlarge", "us-east-1", mine).usd == 2.0
    assert hourly_price("g5.2xlarge", "us-east-1") == shipped
    assert hourly_price("ml.p4d.24xlarge", "us-east-1", mine) == \
        PRICES[("us-east-1", "ml.p4d.24xlarge")]
    assert hourly_price("ml.g5.2xlarge", "eu-west-1", mine) is None
    assert PriceTable().get("ml.g5.2xlarge", "us-east-1") is None


# --- where prices are used ----------------------------------------------------------------

def test_simulate_prices_a_region_from_the_price_file(tmp_path: Path) -> None:
    from lmikit.sim._scenario import deployment, simulate
    from lmikit.sim._workloads import long_doc_qa

    dep = deployment("Qwen/Qwen3-8B", "ml.g5.4xlarge", region="eu-west-1")
    work = long_doc_qa(2, 1000, 4, 1, chunk_size=dep.chunk_size)
    (plain,) = simulate(dep, work, ["sticky_session"], ["cpu"])
    assert plain.usd_per_1k_tokens is None
    assert "no list price for ml.g5.4xlarge in eu-west-1" in plain.price_source
    table = load_prices(_file(tmp_path, [{**ROW, "instance_type": "ml.g5.4xlarge",
                                          "usd_per_hour": 2.2}]))
    (priced,) = simulate(dep, work, ["sticky_session"], ["cpu"], prices=table)
    expected = 2.2 * priced.total_time_s / 3600 / (
        priced.throughput_tokens_s * priced.total_time_s) * 1000
    assert priced.usd_per_1k_tokens == pytest.approx(expected, rel=1e-3)
    assert priced.price_source.startswith(PRICE_LIST_SOURCE)


def test_dashboard_cost_prices_the_specs_own_region(tmp_path: Path) -> None:
    from lmikit.resolve import plan_cost
    from tests.observability.conftest import load_example

    spec, plan = load_example("docqa-qwen7b")
    spec = spec.model_copy(update={"region": "eu-west-1", "instance": spec.instance.model_copy(
        update={"type": "ml.g5.xlarge"})})
    plan = plan.__class__(**{**plan.__dict__, "instance_type": "ml.g5.xlarge"})
    assert plan_cost(spec, plan).hourly_price_usd is None  # us-east-1's price is not eu-west-1's
    cost = plan_cost(spec, plan, prices=load_prices(_file(tmp_path, [ROW])))
    assert cost.hourly_price_usd == 1.58
    assert cost.price_source.startswith(PRICE_LIST_SOURCE)


# --- the CLI ---------------------------------------------------------------------------------

@pytest.fixture
def cli(fake: FakePriceList, monkeypatch: pytest.MonkeyPatch) -> Any:
    real = boto3.Session
    monkeypatch.setattr(boto3, "Session", lambda **kw: fake.install(real(
        aws_access_key_id="t", aws_secret_access_key="t", **kw)))
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")

    def run(*args: str) -> Result:
        return CliRunner().invoke(main, list(args))
    return run


def test_cli_fetch_writes_a_file_simulate_and_show_use(cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "prices.json"
    r = cli("prices", "fetch", "--region", "eu-west-1", "--instance", "ml.g5.xlarge",
            "--instance", "ml.g5.4xlarge", "--instance", "ml.p5.48xlarge", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert "eu-west-1 │ ml.g5.xlarge  │ 1.5800 │ 2026-11-20" in r.output
    assert "Not offered for real-time endpoints in eu-west-1 (or not priced): ml.p5.48xlarge" \
        in r.output
    assert load_prices(out).get("ml.g5.xlarge", "eu-west-1").usd == 1.58
    r = cli("prices", "fetch", "--region", "us-west-2", "--instance", "ml.g5.xlarge", "-o",
            str(out))
    assert r.exit_code == 0, r.output
    assert len(load_prices(out).rows) == 3  # merged into the existing file
    shown = json.loads(cli("prices", "show", "--prices", str(out), "--region", "eu-west-1",
                           "--json").output)
    assert [(p["instance_type"], p["usd_per_hour"]) for p in shown["prices"]] == [
        ("ml.g5.4xlarge", 2.2), ("ml.g5.xlarge", 1.58)]
    r = cli("simulate", "--model", "Qwen/Qwen3-8B", "--instance", "ml.g5.4xlarge", "--region",
            "eu-west-1", "--workload", "long-doc-qa", "--documents", "2",
            "--document-tokens", "1000", "--output-tokens", "4", "--prices", str(out), "--json")
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.output)["results"]
    assert row["usd_per_1k_tokens"] == pytest.approx(
        2.2 / 3600 / row["throughput_tokens_s"] * 1000, rel=1e-3)


def test_cli_fetch_without_a_region_or_permission_fails_clearly(cli: Any,
                                                                fake: FakePriceList) -> None:
    r = cli("prices", "fetch")
    assert r.exit_code == 2
    assert "no region: pass --region" in r.output
    fake.inject("denied")
    r = cli("prices", "fetch", "--region", "eu-west-1")
    assert r.exit_code == 2
    assert "GetProducts failed: AccessDeniedException" in r.output
    assert "Traceback" not in r.output


def test_cli_fetch_refuses_an_unwritable_output_before_asking_aws(
        cli: Any, fake: FakePriceList, tmp_path: Path) -> None:
    r = cli("prices", "fetch", "--region", "eu-west-1", "-o", str(tmp_path / "no" / "p.json"))
    assert r.exit_code == 2
    assert f"cannot write '{tmp_path / 'no' / 'p.json'}': folder '{tmp_path / 'no'}' does " \
        "not exist" in r.output
    assert fake.calls == []


def test_cli_rejects_a_bad_price_file_with_its_reason(cli: Any, tmp_path: Path) -> None:
    bad = _file(tmp_path, [{**ROW, "usd_per_hour": -1}])
    for args in (["prices", "show"], ["simulate", "--model", "Qwen/Qwen3-8B", "--instance",
                                      "ml.g5.4xlarge", "--workload", "long-doc-qa"],
                 ["render", "examples/docqa-qwen7b.yaml", "-t", "grafana"]):
        r = cli(*args, "--prices", str(bad))
        assert r.exit_code == 2
        assert r.output.startswith("CatalogError: price file ")
        assert "usd_per_hour is -1" in r.output


def test_cli_show_refuses_a_region_that_is_not_one(cli: Any) -> None:
    # it printed an empty table and exited 0
    r = cli("prices", "show", "--region", "Ireland")
    assert r.exit_code == 2
    assert "region 'Ireland' is not an AWS region SageMaker is offered in; valid: " \
        "af-south-1" in r.output


def test_cli_render_grafana_prices_from_the_file(cli: Any, tmp_path: Path) -> None:
    spec = "examples/rag-qwen72b-nvme.yaml"  # ml.p4de.24xlarge in us-west-2: not in the table
    plain = cli("render", spec, "-t", "grafana")
    assert plain.exit_code == 0, plain.output
    assert "$n/a/h: no list price for ml.p4de.24xlarge in us-west-2" in plain.output
    table = _file(tmp_path, [{**ROW, "region": "us-west-2", "instance_type": "ml.p4de.24xlarge",
                              "usd_per_hour": 47.5,
                              "usage_type": "USW2-Host:ml.p4de.24xlarge"}])
    priced = cli("render", spec, "-t", "grafana", "--prices", str(table))
    assert priced.exit_code == 0, priced.output
    assert "$47.5/h: AWS Price List Query API" in priced.output
    assert "usage type USW2-Host:ml.p4de.24xlarge" in priced.output
    # the file comes first where the shipped table also lists the type
    docqa = "examples/docqa-qwen7b.yaml"  # ml.g6e.2xlarge in us-east-1
    assert "$2.8026/h: AWS Price List bulk file" in cli("render", docqa, "-t", "grafana").output
    table = _file(tmp_path, [{**ROW, "region": "us-east-1", "instance_type": "ml.g6e.2xlarge",
                              "usd_per_hour": 2.5, "usage_type": "USE1-Host:ml.g6e.2xlarge"}])
    priced = cli("render", docqa, "-t", "grafana", "--prices", str(table))
    assert "$2.5/h: AWS Price List Query API" in priced.output


def test_cli_simulate_region_is_for_the_what_if_form_only(cli: Any) -> None:
    r = cli("simulate", "examples/docqa-qwen7b.yaml", "--region", "eu-west-1", "--workload",
            "long-doc-qa")
    assert r.exit_code == 2
    assert "give either SPEC or --model/--instance/--region, not both" in r.output
    r = cli("simulate", "--model", "Qwen/Qwen3-8B", "--instance", "ml.g5.4xlarge", "--region",
            "Ireland", "--workload", "long-doc-qa")
    assert r.exit_code == 2
    assert "'Ireland' is not an AWS region name such as us-east-1" in r.output


def test_shipped_table_is_what_docs_planner_says() -> None:
    g5 = {f"ml.g5.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge",
                                 "24xlarge", "48xlarge")}
    g6 = {f"ml.g6.{s}" for s in ("xlarge", "2xlarge", "12xlarge", "16xlarge", "24xlarge",
                                 "48xlarge")}
    g6e = {f"ml.g6e.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge")}
    assert {region for region, _ in PRICES} == {"us-east-1"}
    assert {name for _, name in PRICES} == g5 | g6 | g6e | {"ml.p4d.24xlarge", "ml.p5.48xlarge"}
    assert all(p.source and p.as_of for p in PRICES.values())
    # the catalog's types the module docstring names as unpriced
    from lmikit.catalog._instances import INSTANCES
    assert set(INSTANCES) - {name for _, name in PRICES} == {
        "ml.g5.16xlarge", "ml.g6.4xlarge", "ml.g6.8xlarge", "ml.g6e.16xlarge", "ml.g6e.24xlarge",
        "ml.g6e.48xlarge", "ml.p4de.24xlarge", "ml.p5.4xlarge", "ml.p5e.48xlarge",
        "ml.p5en.48xlarge", "ml.p6-b200.48xlarge"}


def test_cli_reads_the_price_file_named_by_lmikit_prices(cli: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    table = _file(tmp_path, [{**ROW, "instance_type": "ml.g5.4xlarge", "usd_per_hour": 2.2}])
    monkeypatch.setenv("LMIKIT_PRICES", str(table))
    r = cli("simulate", "--model", "Qwen/Qwen3-8B", "--instance", "ml.g5.4xlarge", "--region",
            "eu-west-1", "--workload", "long-doc-qa", "--documents", "2",
            "--document-tokens", "1000", "--output-tokens", "4", "--json")
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.output)["results"]
    assert row["usd_per_1k_tokens"] == pytest.approx(
        2.2 / 3600 / row["throughput_tokens_s"] * 1000, rel=1e-3)
    monkeypatch.setenv("LMIKIT_PRICES", str(tmp_path / "missing.json"))
    assert cli("render", "examples/docqa-qwen7b.yaml", "-t", "lmcache").exit_code == 0
    r = cli("render", "examples/docqa-qwen7b.yaml", "-t", "grafana")
    assert r.exit_code == 2
    assert "CatalogError: cannot read price file" in r.output


def test_api_regions_are_the_ones_botocore_serves_the_price_list_from() -> None:
    from lmikit.catalog._price_list import API_REGIONS
    from lmikit.testing._pricing import API_REGIONS as FAKE_REGIONS

    served = set(boto3.Session().get_available_regions("pricing"))  # endpoints.json
    assert set(API_REGIONS) == served
    assert set(FAKE_REGIONS) == served
