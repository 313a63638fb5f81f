"""FakePriceList: a strict AWS Price List Query API (``GetProducts``) for tests.

It plugs in beneath real boto3 ``pricing`` clients at botocore's ``before-send`` event, so
boto3's serializer, parser and retries run. Requests are checked against botocore's service
model (filter types, at most 50 filters, ``MaxResults`` 1-100) and answered as the service
does:

- only ``us-east-1``, ``eu-central-1`` and ``ap-south-1`` serve the API (botocore
  ``endpoints.json``, ``api.pricing``); a client for another region cannot connect;
- ``FormatVersion`` other than ``aws_v1``: InvalidParameterException; an unknown service
  code: NotFoundException; a ``NextToken`` this fake did not issue, or one issued for other
  filters: InvalidNextTokenException;
- filters: TERM_MATCH and EQUALS match a field exactly, CONTAINS as a substring, ANY_OF and
  NONE_OF against a comma-separated list (the API reference's ``Filter.Type``); ``Field`` is
  ``ServiceCode``, ``productFamily`` or an attribute name;
- pages of ``MaxResults`` (default 100) products, each a JSON string in the ``aws_v1``
  format: ``product`` (``productFamily``, ``attributes``, ``sku``), ``serviceCode``,
  ``terms.OnDemand``, ``version`` and ``publicationDate``.

>>> import boto3
>>> fake = FakePriceList()
>>> sku = fake.add_hosting_price("us-west-2", "ml.g5.xlarge", 1.41)
>>> s = fake.install(boto3.Session(aws_access_key_id="t", aws_secret_access_key="t"))
>>> page = s.client("pricing", region_name="us-east-1").get_products(
...     ServiceCode="AmazonSageMaker",
...     Filters=[{"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-west-2"}])
>>> len(page["PriceList"])
1
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import EndpointConnectionError

from lmikit.testing._fake import Call, request_region, service_model
from lmikit.testing._validate import ShapeValidator
from lmikit.testing._wire import RawStream, body_bytes, json_error, json_ok, lower_headers

API_REGIONS = ("us-east-1", "eu-central-1", "ap-south-1")
SERVICE_CODES = ("AmazonSageMaker", "AmazonEC2")
# Region prefixes of usage types in this fake's products (the parser does not depend on them).
_PREFIX = {"us-east-1": "USE1", "us-east-2": "USE2", "us-west-1": "USW1", "us-west-2": "USW2",
           "eu-west-1": "EUW1", "eu-central-1": "EUC1", "ap-south-1": "APS3",
           "ap-northeast-1": "APN1"}
_FAULTS = {"throttle": ("ThrottlingException", "Rate exceeded", 400),
           "5xx": ("InternalErrorException", "An internal error occurred.", 500),
           "denied": ("AccessDeniedException", "User is not authorized to perform: "
                      "pricing:GetProducts", 400)}


@dataclass
class _Fault:
    kind: str
    times: int
    hits: int = 0


@dataclass
class FakePriceList:
    """Products in the ``aws_v1`` format, served through ``GetProducts``."""

    products: list[dict[str, Any]] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    publication: str = "2026-11-01T00:00:00Z"

    def __post_init__(self) -> None:
        self._model = service_model("pricing")
        self._validator = ShapeValidator()
        self._faults: list[_Fault] = []
        self._tokens: dict[str, tuple[str, int]] = {}

    # --- data --------------------------------------------------------------------------

    def add_product(self, service_code: str, family: str, attributes: dict[str, str],
                    usd_per_hour: float | list[float] | None, unit: str = "Hrs") -> str:
        """Add one product; returns its SKU. A list of prices gives one term each."""
        sku = hashlib.sha1(json.dumps([service_code, family, attributes], sort_keys=True)
                           .encode()).hexdigest()[:16].upper()
        prices = [] if usd_per_hour is None else (
            usd_per_hour if isinstance(usd_per_hour, list) else [usd_per_hour])
        terms = {}
        for i, usd in enumerate(prices):
            code = f"{sku}.JRTCKXETX{i}"
            terms[code] = {"offerTermCode": code[-10:], "sku": sku,
                           "effectiveDate": self.publication, "termAttributes": {},
                           "priceDimensions": {f"{code}.6YS6EN2CT7": {
                               "rateCode": f"{code}.6YS6EN2CT7", "unit": unit,
                               "description": f"${usd} per {attributes.get('usagetype')}",
                               "beginRange": "0", "endRange": "Inf", "appliesTo": [],
                               "pricePerUnit": {"USD": f"{usd:.10f}"}}}}
        self.products.append({
            "product": {"productFamily": family, "sku": sku,
                        "attributes": {"servicecode": service_code, **attributes}},
            "serviceCode": service_code, "terms": {"OnDemand": terms},
            "version": re.sub(r"\D", "", self.publication)[:14],  # e.g. 20261005212151
            "publicationDate": self.publication})
        return sku

    def add_hosting_price(self, region: str, instance_type: str,
                          usd_per_hour: float | list[float], *, component: str = "Hosting",
                          usage: str = "Host") -> str:
        """A SageMaker ML Instance product (real-time hosting by default) in ``region``."""
        prefix = _PREFIX.get(region, region.upper().replace("-", "")[:4])
        return self.add_product("AmazonSageMaker", "ML Instance", {
            "regionCode": region, "location": region, "locationType": "AWS Region",
            "instanceName": instance_type, "instanceType": instance_type,
            "platoinstancetype": component, "operation": "RunInstance",
            "usagetype": f"{prefix}-{usage}:{instance_type}",
            "servicename": "Amazon SageMaker"}, usd_per_hour)

    def inject(self, kind: str, times: int = 1) -> None:
        """The next ``times`` GetProducts calls fail: ``throttle``, ``5xx`` or ``denied``."""
        if kind not in _FAULTS:
            raise ValueError(f"fault kind {kind!r}; valid: {', '.join(_FAULTS)}")
        self._faults.append(_Fault(kind, times))

    # --- plugging into boto3 -----------------------------------------------------------

    def install(self, session: Any) -> Any:
        """Route a boto3 session's ``pricing`` clients to this fake; returns the session."""
        events = session.events if hasattr(session, "events") else session.get_component(
            "event_emitter")
        events.register_first("before-send.pricing", self._before_send,
                              unique_id=f"lmikit-fake-pricing-{id(self)}")
        return session

    def _before_send(self, request: Any, **_: Any) -> AWSResponse:
        headers = lower_headers(request.headers)
        region = request_region(headers, "")
        if region not in API_REGIONS:
            raise EndpointConnectionError(endpoint_url=request.url)
        operation = headers.get("x-amz-target", "").rsplit(".", 1)[-1]
        try:
            params = json.loads(body_bytes(request.body) or b"{}")
        except ValueError:
            params = {}
        response = self._answer(operation, params)
        self.calls.append(Call("pricing", operation, params, response.status,
                               headers.get("x-amzn-errortype") if response.status >= 400
                               else None, region))
        return AWSResponse(request.url, response.status, response.headers,
                           RawStream(response.chunks()))

    def _answer(self, operation: str, params: dict[str, Any]) -> Any:
        if operation != "GetProducts":
            return json_error("UnknownOperationException",
                              f"the lmikit fake does not serve {operation}", 400)
        errors = self._validator.validate(
            self._model.operation_model(operation).input_shape, params)
        if errors:
            return json_error("ValidationException", "; ".join(errors), 400)
        for fault in self._faults:
            if fault.hits < fault.times:
                fault.hits += 1
                return json_error(*_FAULTS[fault.kind])
        if params.get("FormatVersion", "aws_v1") != "aws_v1":
            return json_error("InvalidParameterException",
                              "Invalid value for FormatVersion: valid value is aws_v1", 400)
        code = params["ServiceCode"]
        if code not in SERVICE_CODES:
            return json_error("NotFoundException", f"Service code {code} not found", 400)
        query = json.dumps([code, params.get("Filters", [])], sort_keys=True)
        start = 0
        if "NextToken" in params:
            issued = self._tokens.get(params["NextToken"])
            if issued is None or issued[0] != query:
                return json_error("InvalidNextTokenException", "The pagination token is "
                                  "invalid. Try again without a pagination token.", 400)
            start = issued[1]
        matching = [p for p in self.products
                    if p["serviceCode"] == code and all(_matches(p, f)
                                                       for f in params.get("Filters", []))]
        size = params.get("MaxResults", 100)
        page = matching[start:start + size]
        out: dict[str, Any] = {"FormatVersion": "aws_v1",
                               "PriceList": [json.dumps(p) for p in page]}
        if start + size < len(matching):
            token = uuid.uuid4().hex
            self._tokens[token] = (query, start + size)
            out["NextToken"] = token
        return json_ok(out, str(uuid.uuid4()))


def _matches(product: dict[str, Any], f: dict[str, str]) -> bool:
    name = f["Field"]
    if name == "ServiceCode":
        value: str | None = product["serviceCode"]
    elif name == "productFamily":
        value = product["product"]["productFamily"]
    else:
        value = product["product"]["attributes"].get(name)
    if value is None:
        return f["Type"] == "NONE_OF"
    wanted = f["Value"]
    options = [v.strip() for v in wanted.split(",")]
    return {"TERM_MATCH": value == wanted, "EQUALS": value == wanted,
            "CONTAINS": wanted in value, "ANY_OF": value in options,
            "NONE_OF": value not in options}[f["Type"]]


__all__ = ["FakePriceList"]
