"""Checks an exported file against the official OpenLineage schemas carried in tests/data/.

The schemas (spec 2-0-2 and its facets, see tests/data/openlineage-spec/NOTICE.md) are the project's
own copy, so the conformance tests run in any clone, offline. Each line must be a valid RunEvent, and
each facet valid against the official schema of that facet at that place (``job.facets.sql`` against
SQLJobFacet, ``outputs[*].facets.columnLineage`` against ColumnLineageDatasetFacet, ...). Beyond the
schemas, the checks consumers trip over (the "strict" ones): no facet the spec does not define, each
facet's ``_schemaURL`` naming its own schema, transformation types DIRECT or INDIRECT, and column
lineage naming only datasets that are the event's inputs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_DIR = Path(__file__).resolve().parent / "data" / "openlineage-spec"
CORE_ID = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
# Where a facet sits in an event, by the base facet its schema extends.
_PLACES = {
    "RunFacet": "run",
    "JobFacet": "job",
    "DatasetFacet": "dataset",
    "InputDatasetFacet": "input",
    "OutputDatasetFacet": "output",
}


@dataclass(frozen=True)
class _Facet:
    key: str  # e.g. "columnLineage"
    schema_id: str  # the facet file's $id
    definition: str  # e.g. "ColumnLineageDatasetFacet"


@cache
def _spec() -> tuple[Registry, dict[tuple[str, str], _Facet]]:
    """The schema registry, and the facets the spec defines per (place, key)."""
    resources = []
    facets: dict[tuple[str, str], _Facet] = {}
    for path in [SPEC_DIR / "OpenLineage.json", *sorted((SPEC_DIR / "facets").glob("*.json"))]:
        document = json.loads(path.read_text())
        resources.append((document["$id"], Resource(contents=document, specification=DRAFT202012)))
        for definition, body in document.get("$defs", {}).items():
            for part in body.get("allOf", []):
                base = part.get("$ref", "").rsplit("/", 1)[-1]
                if base in _PLACES and part.get("$ref", "").startswith(CORE_ID):
                    for key in document.get("properties", {}):
                        facets[(_PLACES[base], key)] = _Facet(key, document["$id"], definition)
    return Registry().with_resources(resources), facets


@cache
def _validator(schema_id: str, definition: str) -> Draft202012Validator:
    registry, _ = _spec()
    return Draft202012Validator(
        {"$ref": f"{schema_id}#/$defs/{definition}"},
        registry=registry,
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )


def problems_of_event(event: Any) -> list[str]:
    """Everything wrong with one exported event; empty when it conforms."""
    found = [
        f"{_path(error.absolute_path)}: {error.message[:300]}"
        for error in _validator(CORE_ID, "RunEvent").iter_errors(event)
    ]
    if found or not isinstance(event, dict):
        return found
    _, facets = _spec()
    for place, where, facet_key, body in _facets_of(event):
        facet = facets.get((place, facet_key)) or (
            facets.get(("dataset", facet_key)) if place in ("input", "output") else None
        )
        if facet is None:
            found.append(f"{where}: the spec defines no {place} facet {facet_key!r}")
            continue
        found.extend(
            f"{where}.{_path(error.absolute_path)}: {error.message[:300]}"
            for error in _validator(facet.schema_id, facet.definition).iter_errors(body)
        )
        url = body.get("_schemaURL", "") if isinstance(body, dict) else ""
        if not url.startswith(facet.schema_id):
            found.append(f"{where}._schemaURL is {url!r}, not the {facet.definition} schema")
    found.extend(_column_lineage_problems(event))
    return found


def problems_of_file(lines: Iterable[bytes]) -> list[str]:
    """Problems of every line of an NDJSON export, prefixed with the line number."""
    found = []
    for number, line in enumerate(lines, start=1):
        try:
            event = json.loads(line)
        except ValueError as error:
            found.append(f"line {number}: not JSON ({error})")
            continue
        found.extend(f"line {number}: {problem}" for problem in problems_of_event(event))
    return found


def _facets_of(event: dict[str, Any]) -> Iterator[tuple[str, str, str, Any]]:
    """(place, path, facet key, facet) of every facet of the event."""
    for key, body in (event.get("run", {}).get("facets") or {}).items():
        yield "run", f"run.facets.{key}", key, body
    for key, body in (event.get("job", {}).get("facets") or {}).items():
        yield "job", f"job.facets.{key}", key, body
    for side in ("inputs", "outputs"):
        for index, dataset in enumerate(event.get(side) or []):
            for key, body in (dataset.get("facets") or {}).items():
                yield "dataset", f"{side}[{index}].facets.{key}", key, body
            extra = "inputFacets" if side == "inputs" else "outputFacets"
            for key, body in (dataset.get(extra) or {}).items():
                yield side[:-1], f"{side}[{index}].{extra}.{key}", key, body


def _column_lineage_problems(event: dict[str, Any]) -> list[str]:
    inputs = {(d.get("namespace"), d.get("name")) for d in event.get("inputs") or []}
    found = []
    for index, output in enumerate(event.get("outputs") or []):
        lineage = (output.get("facets") or {}).get("columnLineage")
        if not isinstance(lineage, dict):
            continue
        refs = [
            (f"fields.{name}", ref)
            for name, entry in (lineage.get("fields") or {}).items()
            for ref in entry.get("inputFields") or []
        ]
        refs += [("dataset", ref) for ref in lineage.get("dataset") or []]
        for where, ref in refs:
            place = f"outputs[{index}].facets.columnLineage.{where}"
            if (ref.get("namespace"), ref.get("name")) not in inputs:
                found.append(f"{place}: {ref.get('namespace')}/{ref.get('name')} is not one of the inputs")
            for transformation in ref.get("transformations") or []:
                if transformation.get("type") not in ("DIRECT", "INDIRECT"):
                    found.append(f"{place}: transformation type {transformation.get('type')!r}")
    return found


def _path(parts: Iterable[Any]) -> str:
    return ".".join(str(part) for part in parts) or "(event)"
