"""moto's Application Auto Scaling with the inference-component dimension (see
:mod:`lmikit.testing._moto`)."""

from lmikit.testing._moto import DIMENSION, inference_component_dimension

__all__ = ["DIMENSION", "inference_component_dimension"]
