"""Every decision the renderers and the deployer derive from (spec, plan, image kind), made
once into one immutable :class:`Resolved`: where the weights come from, the start-up
estimate and whether it fits SageMaker's caps, the metrics endpoint the image serves,
whether cache metrics are published, the model's LMI option rows, the LoRA cache-tag
isolation, the instance's catalog record, its on-demand offer, the Hub gate and the planned
cost. The renderers read these and never call back into the catalog or the planner.

>>> from lmikit.spec import DeploymentSpec
>>> from lmikit.planner import plan_spec
>>> spec = DeploymentSpec.model_validate({"api_version": "v1", "name": "docqa",
...     "region": "us-east-1", "model": {"id": "Qwen/Qwen2.5-7B-Instruct"},
...     "instance": {"type": "ml.g6e.2xlarge"}})
>>> resolved = resolve_spec(spec, plan_spec(spec))
>>> resolved.weights_source, resolved.metrics_endpoint.path
('hub', '/server/metrics')
"""

from __future__ import annotations

from dataclasses import dataclass

from lmikit.catalog import (
    HubGate,
    ImageKind,
    InstanceType,
    MetricsEndpoint,
    OptionRow,
    PriceTable,
    cache_metrics_absent_reason,
    get_instance,
    hub_gate,
    metrics_endpoint,
    on_demand_problem,
    option_rows,
    publishes_cache_metrics,
    usd_decimals,
    usd_text,
)
from lmikit.planner import (
    Plan,
    StartupEstimate,
    WeightsSource,
    estimate_startup,
    isolates_base,
    startup_problem,
    weights_source,
)
from lmikit.resolve._cost import CostEstimate, plan_cost
from lmikit.spec import DeploymentSpec


@dataclass(frozen=True)
class Resolved:
    """The derived decisions of one (spec, plan, image kind)."""

    image_kind: ImageKind  # the image the SageMaker component runs: AWS's stock LMI or lmikit's
    weights_source: WeightsSource  # hub, s3 (LMI copies), s3-sagemaker (SageMaker copies)
    startup: StartupEstimate  # the plan's, else estimated from the weights and their source
    startup_problem: str | None  # why a SageMaker start cannot fit the API's caps
    metrics_endpoint: MetricsEndpoint  # the Prometheus endpoint the image serves
    publishes_cache_metrics: bool  # the container's vLLM and LMCache metrics reach CloudWatch
    cache_metrics_absent_reason: str | None  # why not, when they do not
    option_rows: tuple[OptionRow, ...]  # the LMI options this model needs at its TP degree
    isolates_base: bool  # the base's model.py drops client cache tags and adapter picks
    instance: InstanceType  # the instance type's catalog record
    on_demand_problem: str | None  # the region has no on-demand hosting of the type
    hub_gate: HubGate | None  # the catalog's gate of a Hub model.id (None: S3 or unknown)
    cost: CostEstimate  # the planned cost per 1K tokens and its price's source
    planned_cost_text: str  # that cost as printed ("n/a" without a price)
    cost_decimals: int  # the decimals that print it (a dashboard panel takes the number)

    @property
    def sagemaker_copies_weights(self) -> bool:
        """SageMaker copies the S3 weights into /opt/ml/model (no model artifact)."""
        return self.weights_source == "s3-sagemaker"


def resolve_spec(spec: DeploymentSpec, plan: Plan, *, image_kind: ImageKind = "stock",
                 hourly_price: float | None = None, prices: PriceTable | None = None
                 ) -> Resolved:
    """Every derived decision of ``spec`` and its ``plan`` for ``image_kind``, each made once.

    ``hourly_price`` and ``prices`` price the planned cost (a price given by the caller, a
    price file) as :func:`lmikit.render.grafana_dashboard` takes them.
    """
    source = weights_source(spec)
    start = plan.startup or estimate_startup(plan.weight_bytes, source)
    detailed = spec.observability.detailed_metrics
    cost = plan_cost(spec, plan, hourly_price, prices)
    usd = cost.usd_per_1k_tokens
    return Resolved(
        image_kind=image_kind,
        weights_source=source,
        startup=start,
        startup_problem=startup_problem(start, spec.model.id, spec.model.hub_id),
        metrics_endpoint=metrics_endpoint(spec.observability.metrics_path, image_kind),
        publishes_cache_metrics=publishes_cache_metrics(image_kind, detailed),
        cache_metrics_absent_reason=cache_metrics_absent_reason(image_kind, detailed),
        option_rows=option_rows(spec.model.catalog_id, spec.engine.tensor_parallel_degree),
        isolates_base=isolates_base(spec, plan.uses_lmcache),
        instance=get_instance(spec.instance.type),
        on_demand_problem=on_demand_problem(spec.region, spec.instance.type),
        hub_gate=None if spec.model.is_s3 else hub_gate(spec.model.id),
        cost=cost,
        planned_cost_text="n/a" if usd is None else usd_text(usd),
        cost_decimals=usd_decimals(usd or 0.0),
    )
