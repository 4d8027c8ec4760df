"""Entities on Table Storage's wire: each property typed where JSON alone cannot say it, and read
back as the type written, with the SDK-shaped metadata beside it. Pure: no service."""

from datetime import UTC, datetime

import pytest

from shared.storage.table_entities import entity_json, row_from_json, substituted


def test_an_entity_reads_back_as_written_with_its_types() -> None:
    written = {
        "PartitionKey": "p",
        "RowKey": "r",
        "small": 7,
        "large": 2**40,
        "ratio": 0.5,
        "flag": True,
        "at": datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
        "blob": b"\x00\xff",
        "absent": None,
    }
    wire = entity_json(written)
    assert wire["large"] == str(2**40) and wire["large@odata.type"] == "Edm.Int64"
    assert "small@odata.type" not in wire and "absent" not in wire
    service_answer = {**wire, "odata.etag": 'W/"1"', "Timestamp": "2026-01-02T03:04:05.1234567Z"}
    row = row_from_json(service_answer)
    assert dict(row) == {name: value for name, value in written.items() if value is not None}
    assert row.metadata == {
        "etag": 'W/"1"',
        "timestamp": datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
    }


def test_a_naive_datetime_is_written_as_utc() -> None:
    assert entity_json({"at": datetime(2026, 1, 2)})["at"] == "2026-01-02T00:00:00.000000Z"


def test_a_property_of_no_table_type_is_refused() -> None:
    with pytest.raises(TypeError, match="cannot hold list"):
        entity_json({"items": [1, 2]})


def test_filter_parameters_become_odata_literals() -> None:
    parameters = {"name": "it's", "big": 2**40, "on": False, "at": datetime(2026, 1, 2, tzinfo=UTC)}
    assert substituted("a eq @name and b lt @big and c eq @on and d ge @at", parameters) == (
        "a eq 'it''s' and b lt 1099511627776L and c eq false "
        "and d ge datetime'2026-01-02T00:00:00.000000Z'"
    )
