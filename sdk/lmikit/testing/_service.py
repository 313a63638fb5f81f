"""The errors the fake answers with, in the service's own terms."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """An error the fake answers with, in the service's own terms."""

    def __init__(self, code: str, message: str, status: int = 400,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.extra = extra or {}


def validation(message: str) -> ServiceError:
    return ServiceError("ValidationException", message)
