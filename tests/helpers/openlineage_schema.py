"""Validating OpenLineage events with ``jsonschema`` against OpenLineage's **published** JSON schemas.

The files under ``openlineage_spec/`` are copied unchanged from the OpenLineage repository (``spec/
OpenLineage.json`` and ``spec/facets/*.json``, Apache-2.0, its ``LICENSE`` beside them; see
``openlineage_spec/SOURCE``). The event is validated against the spec's ``RunEvent``, then every facet
against the schema its ``_schemaURL`` names, every ``$ref`` resolved locally (nothing is downloaded): a
facet kind of the core spec (the Airflow provider's own run facets name ``#/$defs/RunFacet``), a standard
facet by its file in ``openlineage_spec/facets`` (the file of the published version we vendored: the
version in the URL may be older), the JSON files the installed Airflow provider and
openlineage-integration-common ship, or our ``airflowEpochs`` and ``airflowEpochsCorrection`` facets (the
schemas our package ships). A
facet whose schema is none of these is an error: nothing goes unchecked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from airflow_epochs.lineage.corrections import CORRECTION_SCHEMA_URL, correction_facet_schema
from airflow_epochs.lineage.facets import SCHEMA_URL, run_facet_schema

SPEC_DIR = Path(__file__).resolve().parent / "openlineage_spec"
STANDARD_FACETS_BASE = "https://openlineage.io/spec/facets/"
CORE_FACETS = ("BaseFacet", "RunFacet", "JobFacet", "DatasetFacet", "InputDatasetFacet", "OutputDatasetFacet")


@cache
def event_schema() -> dict[str, Any]:
    """The published spec (``OpenLineage.json``, 2-0-2)."""
    schema: dict[str, Any] = json.loads((SPEC_DIR / "OpenLineage.json").read_text())
    return schema


SPEC_ID = str(event_schema()["$id"])


@cache
def standard_facets() -> dict[str, dict[str, Any]]:
    """File name -> the published schema of each standard facet."""
    return {path.name: json.loads(path.read_text()) for path in sorted((SPEC_DIR / "facets").glob("*.json"))}


# ``jsonschema`` checks ``date-time`` and ``uri`` only with optional packages we do not install, and would
# otherwise let any string pass: these two checkers make the spec's formats count.
FORMATS = jsonschema.FormatChecker()
RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
ABSOLUTE_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|\\^`]*")


@FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    """An RFC 3339 timestamp (with its offset) naming a real date and time."""
    if not isinstance(value, str):
        return True  # formats apply to strings only; the type is checked by ``type``
    if RFC3339.fullmatch(value) is None:
        return False
    datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    return True


@FORMATS.checks("uri")
def _is_uri(value: object) -> bool:
    """An absolute URI: a scheme, then no spaces or characters RFC 3986 leaves out."""
    return not isinstance(value, str) or ABSOLUTE_URI.fullmatch(value) is not None


def _installed_schemas(package: str, folder: str) -> dict[str, dict[str, Any]]:
    found = {}
    for item in resources.files(package).joinpath(folder).iterdir():
        if item.name.endswith(".json"):
            found[item.name] = json.loads(item.read_text())
    return found


@cache
def schemas_by_file() -> dict[str, dict[str, Any]]:
    """File name -> schema, for every facet schema file an installed package ships."""
    found = _installed_schemas("airflow.providers.openlineage", "facets")
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
    resources_ = [(SPEC_ID, _resource(event_schema()))]
    for schema in standard_facets().values():
        resources_.append((schema["$id"], _resource(schema)))
    for name, schema in schemas_by_file().items():
        resources_.append((schema.get("$id") or f"urn:file:{name}", _resource(schema)))
    for ours in (run_facet_schema(), correction_facet_schema()):
        resources_.append((ours["$id"], _resource(ours)))
    return Registry().with_resources(resources_)


def _validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema, registry=registry(),
                                           format_checker=FORMATS)


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
    if schema_url in (SCHEMA_URL, CORRECTION_SCHEMA_URL):
        return {"$ref": schema_url}
    base, _, fragment = schema_url.partition("#")
    file = base.rsplit("/", 1)[-1]
    if base == SPEC_ID:  # a facet kind the core spec defines (e.g. the Airflow provider's ``airflow`` run facet)
        if fragment.removeprefix("/$defs/") not in CORE_FACETS:
            raise jsonschema.ValidationError(f"no facet of the core spec at {schema_url!r}")
        return {"$ref": schema_url}
    if base.startswith(STANDARD_FACETS_BASE):
        standard = standard_facets().get(file)
        if standard is None:
            raise jsonschema.ValidationError(f"no published schema for facet schema URL {schema_url!r}")
        definition = fragment.removeprefix("/$defs/") if fragment else file.removesuffix(".json")
        if definition not in standard.get("$defs", {}):
            raise jsonschema.ValidationError(f"no definition {definition!r} in {file} for {schema_url!r}")
        return {"$ref": f"{standard['$id']}#/$defs/{definition}"}
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
    _validator({"$ref": f"{SPEC_ID}#/$defs/RunEvent"}).validate(event)
    for where, name, facet in facets_of(event):
        schema_url = facet.get("_schemaURL")
        if not isinstance(schema_url, str):
            raise jsonschema.ValidationError(f"{where}.{name}: the facet has no _schemaURL")
        try:
            _validator(facet_schema(schema_url)).validate(facet)
        except jsonschema.ValidationError as exc:
            exc.message = f"{where}.{name} ({schema_url}): {exc.message}"
            raise
