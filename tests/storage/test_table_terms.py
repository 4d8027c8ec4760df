"""The store's own names for two Table SDK terms: the SDK takes the store's update modes, and a
refused batch says the same on either client. Pure: no service (test_client_conformance.py
compares the two clients' refusals on Azurite)."""

import pytest
from azure.data.tables import TableTransactionError
from azure.data.tables import UpdateMode as SdkUpdateMode

from shared.storage.table_terms import TransactionFailed, UpdateMode, transaction_failures


def test_the_update_modes_are_the_sdks_by_value() -> None:
    assert UpdateMode.REPLACE == SdkUpdateMode.REPLACE
    assert UpdateMode.MERGE == SdkUpdateMode.MERGE
    assert UpdateMode.MERGE != SdkUpdateMode.REPLACE


@pytest.mark.parametrize(
    "message",
    [
        "1:The update condition specified in the request was not satisfied.",
        "12:The specified entity already exists.",
        "storage answered 500",
        "",
    ],
)
def test_a_refused_batch_names_its_failed_operation_as_the_sdks_error_does(message: str) -> None:
    ours = TransactionFailed(message, 412)
    assert (ours.index, ours.status_code) == (TableTransactionError(message=message).index, 412)


def test_the_sdks_refusal_is_caught_once_the_sdk_is_loaded() -> None:
    try:
        raise TableTransactionError(message="3:The specified entity already exists.")
    except transaction_failures() as caught:
        assert caught.index == 3
