"""A continue's `edits` (RunEdit in openapi.yaml: a JSON array, or its JSON text in a form
field) as the kernel's edit requests. What the document cannot say (which fields each kind
needs, the JSON text's structure) is a 400 naming the field, as for `tools`; a U+0000 is a
422, as anywhere."""

from __future__ import annotations

from typing import Any

from runpoint.runs.edits import EditRequest

from .json_fields import json_field


def edit_requests(edits: str | list[Any] | None) -> list[EditRequest]:
    if edits is None or edits == "":
        return []
    return json_field(edits, list[EditRequest], "edits")
