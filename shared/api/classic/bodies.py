"""The XML of the classic (Service Management) API: cloud services, job collections as
`Resource`s, operation status, name availability and errors, read and written as the legacy
clients and the 2015 recordings show them (docs/classic-api.md).

Elements are matched by local name in any case: the legacy Python client sends `<plan>` where
the schema says `<Plan>`, and no client relies on the namespace of what it sends.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any
from xml.etree.ElementTree import Element, ParseError, TreeBuilder, tostring

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser

from shared.domain.collection import CollectionState, SkuName
from shared.domain.collection_document import CollectionDocument
from shared.domain.problems import FieldError, InvalidRequest
from shared.domain.wire import JsonObject

NAMESPACE = "http://schemas.microsoft.com/windowsazure"
INSTANCE = "http://www.w3.org/2001/XMLSchema-instance"
# What the real service said of a cloud service that is a resource group with no record of its
# own (recorded: Label is then the name).
RESOURCE_GROUP_DESCRIPTION = "Resource group based cloud service."
# How the classic API named a collection's states ("Started" recorded; the others ours).
CLASSIC_STATES = {
    CollectionState.ENABLED.value: "Started",
    CollectionState.DISABLED.value: "Disabled",
    CollectionState.SUSPENDED.value: "Suspended",
    CollectionState.DELETED.value: "Deleted",
}
LONGEST_LABEL, LONGEST_DESCRIPTION = 100, 1024
# A region's display name ("West Europe"); kept short like the ARM side's `location`, far inside
# the 32K characters a table property holds.
LONGEST_GEO_REGION = 100
# What a classic body may be. The largest real one, a `<Resource>` with its quota, is well under
# 1 KB and 5 levels deep; without these, a 4 MB body of half a million nested elements was
# parsed whole (about 160 MB of memory for one request).
LARGEST_BODY = 64 * 1024  # bytes
DEEPEST_NESTING = 16  # elements, the root counting as one
_WHOLE_NUMBER = re.compile(r"[0-9]{1,18}")
_QUOTA_COUNTS = (("maxJobCount", "MaxJobCount"), ("maxJobOccurrence", "MaxJobOccurrence"))

Content = str | int | None | Sequence[Element]


def document(root: str, *children: Element) -> Element:
    """A response's root element, with the namespaces every classic answer declares."""
    element = Element(root, {"xmlns": NAMESPACE, "xmlns:i": INSTANCE})
    element.extend(children)
    return element


def node(tag: str, content: Content = None, **attributes: str) -> Element:
    """An element holding text (a str or int) or child elements."""
    element = Element(tag, attributes)
    if isinstance(content, str | int):
        element.text = str(content)
    elif content:
        element.extend(content)
    return element


def serialized(element: Element) -> bytes:
    return bytes(tostring(element, encoding="utf-8", xml_declaration=False))


class _TooDeep(Exception):
    pass


class _ShallowTreeBuilder(TreeBuilder):
    """A tree builder that stops the parse at the first element nested too deep."""

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0

    def start(self, tag: Any, attrs: Any) -> Element:
        self._depth += 1
        if self._depth > DEEPEST_NESTING:
            raise _TooDeep()
        return super().start(tag, attrs)

    def end(self, tag: Any) -> Element:
        self._depth -= 1
        return super().end(tag)


def read(body: bytes, root: str) -> Element:
    """The request body as XML whose root element is `root`, or InvalidRequest saying why not.

    DTDs, entities and external references are refused (defusedxml), and so are bodies larger
    or nested deeper than any classic request needs, before they cost more than they are worth.
    """
    if not body.strip():
        raise InvalidRequest.because("", f"the request body is empty; a <{root}> is required")
    if len(body) > LARGEST_BODY:
        raise InvalidRequest.because(
            "", f"the request body is {len(body)} bytes; at most {LARGEST_BODY} are allowed"
        )
    parser = DefusedXMLParser(target=_ShallowTreeBuilder(), forbid_dtd=True)
    try:
        parser.feed(body)
        element: Element = parser.close()
    except _TooDeep:
        raise InvalidRequest.because(
            "", f"the request body nests elements more than {DEEPEST_NESTING} deep"
        ) from None
    except LookupError as unknown:  # an encoding="..." Python has no codec for
        raise InvalidRequest.because(
            "", f"the request body is not valid XML: {unknown}; send it as UTF-8"
        ) from None
    except (ParseError, DefusedXmlException, ValueError) as bad:
        raise InvalidRequest.because("", f"the request body is not valid XML: {bad}") from None
    if _local(element.tag) != root.casefold():
        shown = _local(element.tag)[:40]
        raise InvalidRequest.because("", f"the root element must be <{root}>, not <{shown}>")
    return element


def text_of(element: Element | None, *path: str) -> str | None:
    """The text at `path` below `element` (names in any case), or None if absent or empty."""
    for name in path:
        if element is None:
            return None
        element = child(element, name)
    if element is None or element.text is None or not element.text.strip():
        return None
    return element.text.strip()


def child(element: Element, name: str) -> Element | None:
    return next((found for found in element if _local(found.tag) == name.casefold()), None)


# --- cloud services -------------------------------------------------------------------------


def cloud_service_document(name: str, body: bytes) -> dict[str, str]:
    """What a cloud service PUT sends, as stored: label, description and geoRegion."""
    sent = read(body, "CloudService")
    label = text_of(sent, "Label") or name
    description = text_of(sent, "Description") or ""
    region = text_of(sent, "GeoRegion")
    problems = []
    if region is None:
        problems.append(FieldError("GeoRegion", "is required"))
    if region is not None and len(region) > LONGEST_GEO_REGION:
        problems.append(FieldError("GeoRegion", f"is longer than {LONGEST_GEO_REGION} characters"))
    if len(label) > LONGEST_LABEL:
        problems.append(FieldError("Label", f"is longer than {LONGEST_LABEL} characters"))
    if len(description) > LONGEST_DESCRIPTION:
        problems.append(
            FieldError("Description", f"is longer than {LONGEST_DESCRIPTION} characters")
        )
    if problems:
        raise InvalidRequest(problems)
    return {"label": label, "description": description, "geoRegion": region or ""}


def cloud_service(
    name: str,
    record: dict[str, str] | None,
    collections: Iterable[tuple[str, CollectionDocument, str]],
) -> Element:
    """A `<CloudService>` with its job collections (name, stored document, etag) as resources.

    Without a record of its own, it is a resource group that holds collections, shown as the
    real service showed those.
    """
    collections = list(collections)
    if record is None:
        region = next((doc.location or "" for _, doc, _ in collections), "")
        record = {"label": name, "description": RESOURCE_GROUP_DESCRIPTION, "geoRegion": region}
    return node(
        "CloudService",
        [
            node("Name", name),
            node("Label", record["label"]),
            node("Description", record["description"]),
            node("GeoRegion", record["geoRegion"]),
            node("Resources", [listed_resource(*collection) for collection in collections]),
        ],
    )


# --- job collections ------------------------------------------------------------------------


def collection_body(body: bytes) -> JsonObject:
    """A job collection PUT's `<Resource>` as the properties of an ARM collection body."""
    sent = read(body, "Resource")
    settings = child(sent, "IntrinsicSettings")
    if settings is None:
        raise InvalidRequest.because("IntrinsicSettings", "is required")
    plan = text_of(settings, "Plan")
    if plan is None:
        raise InvalidRequest.because("IntrinsicSettings.Plan", "is required")
    try:
        sku = SkuName(plan)
    except ValueError:
        allowed = ", ".join(name.value for name in SkuName)
        raise InvalidRequest.because(
            "IntrinsicSettings.Plan", f"'{plan[:40]}' is not one of {allowed}"
        ) from None
    properties: JsonObject = {"sku": {"name": sku.value}}
    quota = child(settings, "Quota")
    if quota is not None:
        properties["quota"] = _quota_of(quota)
    return properties


def _quota_of(quota: Element) -> JsonObject:
    found: JsonObject = {}
    for wire, name in _QUOTA_COUNTS:
        value = text_of(quota, name)
        if value is not None:
            found[wire] = _number(value)
    recurrence = child(quota, "MaxRecurrence")
    if recurrence is not None:
        frequency, interval = text_of(recurrence, "Frequency"), text_of(recurrence, "Interval")
        found["maxRecurrence"] = {"frequency": frequency} | (
            {} if interval is None else {"interval": _number(interval)}
        )
    return found


def _number(text: str) -> int | str:
    """ASCII digits as the number JSON would carry; anything else as sent, for the rules to
    refuse (int() alone would read other scripts' digits as well)."""
    return int(text) if _WHOLE_NUMBER.fullmatch(text) else text


def resource(name: str, collection: CollectionDocument, etag: str) -> Element:
    """A job collection as its GET answers it: the recorded `<Resource>`, elements in its order."""
    return document(
        "Resource",
        node("CloudServiceSettings", [node("GeoRegion", collection.location or "")]),
        node("ETag", etag),
        _intrinsic_settings(collection),
        node("Name", name),
        node(
            "OperationStatus",
            [
                node("Error", [node("HttpCode", 200), node("Message", "OK")]),
                node("Result", "Succeeded"),
            ],
        ),
        node("PromotionCode", ""),
        node("SchemaVersion", "1.1"),
        node("State", _state(collection)),
        node("SubState", **{"i:nil": "true"}),
        node("Type", "jobcollections"),
    )


def listed_resource(name: str, collection: CollectionDocument, etag: str) -> Element:
    """A job collection inside its cloud service, as the recorded listing shows one."""
    return node(
        "Resource",
        [
            node("ResourceProviderNamespace", "Scheduler"),
            node("Type", "jobcollections"),
            node("Name", name),
            node("SchemaVersion", "1.1"),
            node("ETag", etag),
            node("State", _state(collection)),
            _intrinsic_settings(collection),
            node("OperationStatus", [node("Type", "Create"), node("Result", "Succeeded")]),
            node("Label", name),
        ],
    )


def _intrinsic_settings(collection: CollectionDocument) -> Element:
    settings = [node("Plan", collection.sku.value)]
    quota = collection.quota.to_wire() if collection.quota is not None else {}
    if quota:  # as on the ARM side: only what was sent
        limits = [node(name, quota[wire]) for wire, name in _QUOTA_COUNTS if wire in quota]
        if "maxRecurrence" in quota:
            most = quota["maxRecurrence"]
            frequency = str(most["frequency"])
            recurrence = [
                node("Frequency", frequency[:1].upper() + frequency[1:]),
                node("Interval", most.get("interval", 1)),
            ]
            limits.append(node("MaxRecurrence", recurrence))
        settings.append(node("Quota", limits))
    return node("IntrinsicSettings", settings)


def _state(collection: CollectionDocument) -> str:
    return CLASSIC_STATES[collection.state.value]


# --- answers of the API's own -----------------------------------------------------------------


def availability(available: bool, reason: str, *, dotnet: bool) -> Element:
    """The name check's answer. The two legacy clients read different shapes: the Python one
    POSTs and reads `AvailabilityResponse/Result`, the .NET one GETs and reads
    `ResourceNameAvailabilityResponse/IsAvailable`."""
    flag = "true" if available else "false"
    if dotnet:
        return document("ResourceNameAvailabilityResponse", node("IsAvailable", flag))
    answer = [node("Result", flag)] + ([] if available else [node("Reason", reason)])
    return document("AvailabilityResponse", *answer)


def operation(request_id: str) -> Element:
    """A finished operation's status, as recorded: the id in GUID form, and 200 for the outcome
    whatever the change answered (202 for a cloud service, 201 for a job)."""
    guid = "-".join(
        request_id[start:end] for start, end in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32))
    )
    status = [node("ID", guid), node("Status", "Succeeded"), node("HttpStatusCode", 200)]
    return document("Operation", *status)


def error(code: str, message: str) -> Element:
    return document("Error", node("Code", code), node("Message", message))


def _local(tag: str) -> str:
    """An element's name without its namespace, folded: `{ns}Plan` -> `plan`."""
    return tag.rsplit("}", 1)[-1].casefold()
