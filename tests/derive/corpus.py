"""Load the hand-written corpus (``corpus/*.yaml``); shared by the tests and ``bench/bench_derive.py``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lineage_core.derive import DatasetSchema

CORPUS_DIR = Path(__file__).parent / "corpus"

# (output field or None, input namespace, input name, input field, type, subtype, masking)
Expected = tuple[str | None, str, str, str, str, str, bool]


@dataclass(frozen=True)
class Case:
    name: str
    dialect: str | None
    query: str
    inputs: tuple[DatasetSchema, ...]
    outputs: tuple[DatasetSchema, ...]
    edges: frozenset[Expected]
    unmatched: tuple[str, ...]
    functions: dict[str, str]
    status: str


def _datasets(items: list[dict[str, Any]] | None) -> tuple[DatasetSchema, ...]:
    return tuple(
        DatasetSchema(item["namespace"], item["name"], tuple(item.get("fields") or ()))
        for item in items or []
    )


def load_case(path: Path) -> Case:
    raw = yaml.safe_load(path.read_text())
    inputs = _datasets(raw.get("inputs"))
    namespaces = {d.name: d.namespace for d in inputs}
    edges: set[Expected] = set()
    for out_field, in_name, in_field, type_, subtype, masking in raw.get("edges") or []:
        edges.add((out_field, namespaces[in_name], in_name, in_field, type_, subtype, bool(masking)))
    return Case(
        name=path.stem,
        dialect=raw.get("dialect"),
        query=raw["query"],
        inputs=inputs,
        outputs=_datasets(raw.get("outputs")),
        edges=frozenset(edges),
        unmatched=tuple(raw.get("unmatched") or ()),
        functions=dict(raw.get("functions") or {}),
        status=raw.get("status", "derived"),
    )


def load_corpus() -> list[Case]:
    return [load_case(path) for path in sorted(CORPUS_DIR.glob("*.yaml"))]
