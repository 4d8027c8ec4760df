"""The storage aggregates (interface.py) on Table Storage, wired to one another here.

Collections (job_collections.py) and their jobs (jobs.py), counted in counter rows
(job_counting.py, counter_rows.py), with their history (history.py) and the executor's gate and
settlement (executor_records.py) in each collection's jobs partition; the classic API's records
(classic_records.py). Every part keeps Table Storage's rules: keys (keys.py), documents and
etags (documents.py), batches of one partition and at most 100 operations (batches.py).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence

from azure.core.exceptions import ResourceExistsError

from shared.storage.classic_records import CLOUD_SERVICES_TABLE, OPERATIONS_TABLE, ClassicRecords
from shared.storage.clients import tables_from_connection_string
from shared.storage.counter_rows import SPARES_KEPT_FOR_S
from shared.storage.executor_records import ExecutorRecords
from shared.storage.history import History
from shared.storage.interface import Storage
from shared.storage.job_collections import COLLECTIONS_TABLE, Collections
from shared.storage.job_counting import JobCounting
from shared.storage.job_names import JobNames
from shared.storage.jobs import JOBS_TABLE, Jobs
from shared.storage.table_http import TableServiceLike

TABLES = (COLLECTIONS_TABLE, JOBS_TABLE, CLOUD_SERVICES_TABLE, OPERATIONS_TABLE)


def table_storage(
    service: TableServiceLike, *, spares_kept_for_s: float = SPARES_KEPT_FOR_S
) -> Storage:
    """Every aggregate on the tables of one Table Storage account (`Storage`'s fields are
    typed by the protocols, so mypy holds each part to its aggregate's contract here)."""
    jobs_table = service.get_table_client(JOBS_TABLE)
    counting = JobCounting(jobs_table, spares_kept_for_s=spares_kept_for_s)
    history = History(jobs_table)
    names = JobNames()
    collections = Collections(
        service.get_table_client(COLLECTIONS_TABLE), jobs_table, counting.rows, names
    )
    return Storage(
        collections=collections,
        jobs=Jobs(jobs_table, counting, history, collections, names),
        history=history,
        executor=ExecutorRecords(jobs_table, history),
        classic=ClassicRecords(
            service.get_table_client(CLOUD_SERVICES_TABLE),
            service.get_table_client(OPERATIONS_TABLE),
        ),
        create_tables=functools.partial(create_tables, service),
    )


def table_storage_from_connection_string(
    connection_string: str, *, spares_kept_for_s: float = SPARES_KEPT_FOR_S
) -> Storage:
    return table_storage(
        tables_from_connection_string(connection_string), spares_kept_for_s=spares_kept_for_s
    )


def create_tables(service: TableServiceLike, names: Sequence[str] = TABLES) -> None:
    """Make sure the tables `names` exist (by default, those the aggregates keep their records
    in). One query finds those already there, so that an instance starting on a deployment
    that has them all sends that one request, not one create per table, each refused with a
    409 that the account's metrics count as an error."""
    query = " or ".join(f"TableName eq @table{number}" for number in range(len(names)))
    parameters = {f"table{number}": name for number, name in enumerate(names)}
    there = {table.name for table in service.query_tables(query, parameters=parameters)}
    for name in names:
        if name not in there:
            with contextlib.suppress(ResourceExistsError):  # another instance made it meanwhile
                service.create_table(name)
