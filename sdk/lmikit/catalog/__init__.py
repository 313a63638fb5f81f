"""Facts about the world the planner and renderers read: model KV geometry and options,
SageMaker GPU instances, LMI images and what each serves, hosting prices and offers, regions.

Every module here imports only the standard library (the price-list fetch imports boto3 when
called), so the container can share them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmikit import _lazy_face

_EXPORTS = {
    "API_REGIONS": "lmikit.catalog._price_list",
    "CONTAINER_PORT": "lmikit.catalog._containers",
    "ConfigShape": "lmikit.catalog._model_config",
    "DJL_METRICS_PATH": "lmikit.catalog._containers",
    "Fetched": "lmikit.catalog._price_list",
    "HubGate": "lmikit.catalog._models",
    "IMAGE_KINDS": "lmikit.catalog._containers",
    "INSTANCES": "lmikit.catalog._instances",
    "ImageKind": "lmikit.catalog._containers",
    "InstanceType": "lmikit.catalog._instances",
    "MAX_CONFIG_BYTES": "lmikit.catalog._model_config",
    "MAX_USD_PER_HOUR": "lmikit.catalog._prices",
    "MODEL_DIR": "lmikit.catalog._containers",
    "MetricsEndpoint": "lmikit.catalog._containers",
    "ModelGeometry": "lmikit.catalog._models",
    "OptionRow": "lmikit.catalog._model_options",
    "Price": "lmikit.catalog._prices",
    "PriceTable": "lmikit.catalog._prices",
    "REGION_RE": "lmikit.catalog._prices",
    "RESERVED_PATHS": "lmikit.catalog._containers",
    "SCRAPE_DEFAULT_PATH": "lmikit.catalog._containers",
    "TRAINING_PLAN_TYPES": "lmikit.catalog._offers",
    "VLLM_VERSION": "lmikit.catalog._model_options",
    "cache_metrics_absent_reason": "lmikit.catalog._containers",
    "catalog_entry": "lmikit.catalog._models",
    "catalog_ids": "lmikit.catalog._models",
    "check_regions": "lmikit.catalog._price_list",
    "close_regions": "lmikit.catalog._regions",
    "config_shape": "lmikit.catalog._model_config",
    "fetch_hosting_prices": "lmikit.catalog._price_list",
    "get_instance": "lmikit.catalog._instances",
    "get_model": "lmikit.catalog._models",
    "hourly_price": "lmikit.catalog._prices",
    "hub_gate": "lmikit.catalog._models",
    "image_kind_of": "lmikit.catalog._containers",
    "is_hourly_usd": "lmikit.catalog._prices",
    "listed": "lmikit.catalog._prices",
    "lmi_image_uri": "lmikit.catalog._images",
    "lmikit_image_placeholder": "lmikit.catalog._containers",
    "load_prices": "lmikit.catalog._prices",
    "max_model_len_problem": "lmikit.catalog._context",
    "metrics_endpoint": "lmikit.catalog._containers",
    "ml_name": "lmikit.catalog._instances",
    "offered": "lmikit.catalog._offers",
    "on_demand_problem": "lmikit.catalog._offers",
    "option_rows": "lmikit.catalog._model_options",
    "price_or_reason": "lmikit.catalog._prices",
    "publishes_cache_metrics": "lmikit.catalog._containers",
    "read_config_file": "lmikit.catalog._model_config",
    "region_problem": "lmikit.catalog._regions",
    "reserved_path_problem": "lmikit.catalog._containers",
    "unsupported_by": "lmikit.catalog._model_options",
    "usd_decimals": "lmikit.catalog._prices",
    "usd_text": "lmikit.catalog._prices",
    "version_tuple": "lmikit.catalog._images",
}

__all__ = [
    "API_REGIONS",
    "CONTAINER_PORT",
    "ConfigShape",
    "DJL_METRICS_PATH",
    "Fetched",
    "HubGate",
    "IMAGE_KINDS",
    "INSTANCES",
    "ImageKind",
    "InstanceType",
    "MAX_CONFIG_BYTES",
    "MAX_USD_PER_HOUR",
    "MODEL_DIR",
    "MetricsEndpoint",
    "ModelGeometry",
    "OptionRow",
    "Price",
    "PriceTable",
    "REGION_RE",
    "RESERVED_PATHS",
    "SCRAPE_DEFAULT_PATH",
    "TRAINING_PLAN_TYPES",
    "VLLM_VERSION",
    "cache_metrics_absent_reason",
    "catalog_entry",
    "catalog_ids",
    "check_regions",
    "close_regions",
    "config_shape",
    "fetch_hosting_prices",
    "get_instance",
    "get_model",
    "hourly_price",
    "hub_gate",
    "image_kind_of",
    "is_hourly_usd",
    "listed",
    "lmi_image_uri",
    "lmikit_image_placeholder",
    "load_prices",
    "max_model_len_problem",
    "metrics_endpoint",
    "ml_name",
    "offered",
    "on_demand_problem",
    "option_rows",
    "price_or_reason",
    "publishes_cache_metrics",
    "read_config_file",
    "region_problem",
    "reserved_path_problem",
    "unsupported_by",
    "usd_decimals",
    "usd_text",
    "version_tuple",
]

__getattr__, __dir__ = _lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from lmikit.catalog._containers import (
        CONTAINER_PORT,
        DJL_METRICS_PATH,
        IMAGE_KINDS,
        MODEL_DIR,
        RESERVED_PATHS,
        SCRAPE_DEFAULT_PATH,
        ImageKind,
        MetricsEndpoint,
        cache_metrics_absent_reason,
        image_kind_of,
        lmikit_image_placeholder,
        metrics_endpoint,
        publishes_cache_metrics,
        reserved_path_problem,
    )
    from lmikit.catalog._context import max_model_len_problem
    from lmikit.catalog._images import lmi_image_uri, version_tuple
    from lmikit.catalog._instances import INSTANCES, InstanceType, get_instance, ml_name
    from lmikit.catalog._model_config import (
        MAX_CONFIG_BYTES,
        ConfigShape,
        config_shape,
        read_config_file,
    )
    from lmikit.catalog._model_options import VLLM_VERSION, OptionRow, option_rows, unsupported_by
    from lmikit.catalog._models import (
        HubGate,
        ModelGeometry,
        catalog_entry,
        catalog_ids,
        get_model,
        hub_gate,
    )
    from lmikit.catalog._offers import TRAINING_PLAN_TYPES, offered, on_demand_problem
    from lmikit.catalog._price_list import (
        API_REGIONS,
        Fetched,
        check_regions,
        fetch_hosting_prices,
    )
    from lmikit.catalog._prices import (
        MAX_USD_PER_HOUR,
        REGION_RE,
        Price,
        PriceTable,
        hourly_price,
        is_hourly_usd,
        listed,
        load_prices,
        price_or_reason,
        usd_decimals,
        usd_text,
    )
    from lmikit.catalog._regions import close_regions, region_problem
