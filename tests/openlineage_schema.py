"""Validating OpenLineage events against OpenLineage's JSON schemas with ``jsonschema``.

The event itself against ``OpenLineage.json#/$defs/RunEvent`` (vendored in ``openlineage_spec/``, see
its README for where it came from), then every facet against the schema its ``_schemaURL`` names:
a definition of the core spec (the Airflow provider's own run facets name ``#/$defs/RunFacet``),
OpenLineage's standard facets (vendored), the JSON files the installed Airflow provider and
openlineage-integration-common ship, or our ``airflowEpochs`` facet (the schema our package ships). A
facet whose schema is none of these is an error: nothing goes unchecked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from airflow_epochs.lineage.facets import SCHEMA_URL, run_facet_schema

SPEC = Path(__file__).parent / "openlineage_spec"
CORE_ID = "https://openlineage.io/spec/2-0-2/OpenLineage.json"


def _installed_schemas(package: str, folder: str) -> dict[str, dict[str, Any]]:
    found = {}
    for item in resources.files(package).joinpath(folder).iterdir():
        if item.name.endswith(".json"):
            found[item.name] = json.loads(item.read_text())
    return found


@cache
def schemas_by_file() -> dict[str, dict[str, Any]]:
    """File name -> schema, for every facet schema we can check against."""
    found = {path.name: json.loads(path.read_text()) for path in sorted((SPEC / "facets").glob("*.json"))}
    found.update(_installed_schemas("airflow.providers.openlineage", "facets"))
    found.update(_installed_schemas("openlineage.common", "schema"))
    return found


def _resource(schema: dict[str, Any]) -> Resource:
    # Some installed facet files name a dialect by a URL ``referencing`` does not know
    # (``http://json-schema.org/schema#``): those are read as draft 2020-12, as the spec's own are.
    if schema.get("$schema", "").startswith("https://json-schema.org/draft/"):
        return Resource.from_contents(schema, default_specification=DRAFT202012)
    return DRAFT202012.create_resource(schema)


@cache
def registry() -> Registry:
    core = json.loads((SPEC / "OpenLineage.json").read_text())
    assert core["$id"] == CORE_ID, core["$id"]
    resources_ = [(CORE_ID, _resource(core))]
    for name, schema in schemas_by_file().items():
        resources_.append((schema.get("$id") or f"urn:file:{name}", _resource(schema)))
    ours = run_facet_schema()
    resources_.append((ours["$id"], _resource(ours)))
    return Registry().with_resources(resources_)


def _validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema, registry=registry(),
                                           format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def facets_of(event: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(where, name, facet) for every facet of the event: run, job, and each dataset's."""
    for part in ("run", "job"):
        for name, facet in (event.get(part, {}).get("facets") or {}).items():
            yield part, name, facet
    for kind in ("inputs", "outputs"):
        for dataset in event.get(kind) or []:
            for key in ("facets", "inputFacets", "outputFacets"):
                for name, facet in (dataset.get(key) or {}).items():
                    yield f"{kind}[{dataset.get('name')}].{key}", name, facet


def facet_schema(schema_url: str) -> dict[str, Any]:
    """The schema a facet's ``_schemaURL`` names, as a reference into the registry."""
    if schema_url == SCHEMA_URL:
        return {"$ref": SCHEMA_URL}
    base, _, fragment = schema_url.partition("#")
    file = base.rsplit("/", 1)[-1]
    if base == CORE_ID:  # a facet the core spec defines (e.g. the Airflow provider's ``airflow`` run facet)
        return {"$ref": f"{CORE_ID}#{fragment}"}
    schema = schemas_by_file().get(file)
    if schema is None:
        raise jsonschema.ValidationError(f"no known schema for facet schema URL {schema_url!r}")
    where = schema.get("$id") or f"urn:file:{file}"
    if fragment:
        return {"$ref": f"{where}#{fragment}"}
    definition = file.removesuffix(".json")
    return {"$ref": f"{where}#/$defs/{definition}"} if definition in schema.get("$defs", {}) else {"$ref": where}


def validate_event(event: dict[str, Any]) -> None:
    """Raise :class:`jsonschema.ValidationError` unless the event and each of its facets is valid."""
    _validator({"$ref": f"{CORE_ID}#/$defs/RunEvent"}).validate(event)
    for where, name, facet in facets_of(event):
        schema_url = facet.get("_schemaURL")
        if not isinstance(schema_url, str):
            raise jsonschema.ValidationError(f"{where}.{name}: the facet has no _schemaURL")
        try:
            _validator(facet_schema(schema_url)).validate(facet)
        except jsonschema.ValidationError as exc:
            exc.message = f"{where}.{name} ({schema_url}): {exc.message}"
            raise
