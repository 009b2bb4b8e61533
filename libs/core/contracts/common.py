"""Small shapes used by several tools."""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from echo_memory.libs.core.contracts.hygiene import clean_value, refuse_nul

Confidence = Literal["extracted", "inferred", "ambiguous"]
CausalHint = Literal["caused_by", "led_to", "enabled_by", "blocked_by", "contradicts"]


class StrictModel(BaseModel):
    """Tool inputs reject unknown fields, so a typo is an error instead of silently ignored.

    Every string argument, however nested, passes the text hygiene of libs/core/contracts/hygiene.py
    before any other check: control and bidirectional characters are refused naming the field,
    zero-width characters are removed (so a name made only of them is then empty, and refused).
    """

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    # Fields carried byte for byte (an export file's own records): only NUL is refused in them.
    verbatim_fields: ClassVar[frozenset[str]] = frozenset()
    # Fields whose zero-width characters are kept (a document's content, identified by its hash).
    zero_width_kept: ClassVar[frozenset[str]] = frozenset()

    @field_validator("*", mode="before")
    @classmethod
    def _text_hygiene(cls, value: Any, info: ValidationInfo) -> Any:
        name = info.field_name or ""
        if name in cls.verbatim_fields:
            refuse_nul(value)
            return value
        field = cls.model_fields.get(name)
        if field is not None and _holds_model(field.annotation):  # type: ignore[arg-type]  # typing forms are hashable
            return value  # a nested input model applies its own hygiene, with its own exemptions
        return clean_value(value, keep_zero_width=name in cls.zero_width_kept)


@cache
def _holds_model(annotation: Any) -> bool:
    """True when a field's type is, or contains (list[...], X | None), a pydantic model."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_holds_model(arg) for arg in get_args(annotation))


class Provenance(BaseModel):
    """Who wrote an item, through what, and when it was true."""

    agent_id: str
    tool: str | None = None
    project: str | None = None
    session_id: str | None = None
    written_at: datetime
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    scope: str
