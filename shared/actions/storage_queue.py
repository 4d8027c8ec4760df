"""The StorageQueue action: one message on a queue of the job's storage account, sent with its SAS.

Receivers built for Azure Scheduler expect what it sent: the job's message wrapped in a small XML
document (`StorageQueueMessage`) that also says which job and occurrence it comes from, and the
queue message text base64-encoded, as the .NET storage client and the Functions queue trigger
encode and decode by default. We send exactly that; the XML declaration names UTF-8, which is
what the bytes are (the original said utf-16, an artefact of .NET strings, and parsers that
read the text as a string accept either).
"""

from __future__ import annotations

import re
import uuid
from xml.sax.saxutils import escape

from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ResourceNotFoundError,
    ServiceRequestError,
)
from azure.storage.queue import LinearRetry, QueueClient, TextBase64EncodePolicy

from shared.actions import Performed
from shared.actions.clients import ClientPool
from shared.domain.attempts import Attempt, execution_id
from shared.domain.ids import JobId
from shared.domain.job_definition import ErrorAction
from shared.domain.wire import iso
from shared.settings import Settings
from shared.transport import with_pooled_transport

CONNECT_TIMEOUT_S = 10
READ_TIMEOUT_S = 20
# On connection failures and 5xx: three tries about 2 s apart (the SDK's default waits 15 s and
# more between tries), so a send is over within about 90 s at worst.
RETRIES = LinearRetry(backoff=2, random_jitter_range=1, retry_total=2)
_MOST_CLIENTS = 64
_SIGNATURE = re.compile(r"(sig=)[^&\s'\"]+", re.IGNORECASE)


def envelope(message: str, job: JobId, attempt: Attempt, region: str) -> str:
    """The XML document Azure Scheduler put on the queue, around the job's own message."""
    fields = (
        ("ExecutionTag", execution_id(job, attempt)),
        ("ClientRequestId", str(uuid.uuid4())),
        ("ExpectedExecutionTime", iso(attempt.expected)),
        ("SchedulerJobId", job.name),
        ("SchedulerJobCollectionId", job.collection.name),
        ("Region", region),
        ("Message", message),
    )
    elements = "".join(f"<{name}>{escape(value)}</{name}>" for name, value in fields)
    return (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<StorageQueueMessage xmlns:xsd="http://www.w3.org/2001/XMLSchema"'
        ' xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
        f"{elements}</StorageQueueMessage>"
    )


class StorageQueueActions:
    """Sends StorageQueue actions, keeping one client (and its connections) per queue and SAS."""

    def __init__(self, settings: Settings, timeout: float = READ_TIMEOUT_S) -> None:
        self._settings, self._timeout = settings, timeout
        self._clients: ClientPool[QueueClient] = ClientPool(_MOST_CLIENTS)

    def perform(
        self, action: ErrorAction, job: JobId, attempt: Attempt, region: str = ""
    ) -> Performed:
        """Put the message on the queue, and say how it went."""
        wanted = action.queue_message
        if wanted is None:
            raise ValueError("a StorageQueue action without its queueMessage")
        account, queue, sas = wanted.storage_account, wanted.queue_name, wanted.sas_token
        where = f"queue '{queue}' of storage account '{account}'"
        text = envelope(wanted.message, job, attempt, region)
        try:
            self._client(account, queue, sas).send_message(text)
        except ClientAuthenticationError as refused:
            return _failed(f"The SAS token was refused for {where}", refused, sas)
        except ResourceNotFoundError as missing:
            return _failed(f"There is no {where}", missing, sas)
        except ServiceRequestError as unreachable:
            return _failed(f"Storage for {where} could not be reached", unreachable, sas)
        except HttpResponseError as failed:
            return _failed(f"Storage refused the message for {where}", failed, sas)
        except (AzureError, ValueError) as failed:
            return _failed(f"The message could not be put on {where}", failed, sas)
        return Performed(True, f"StorageQueue Action - The message was put on {where}")

    def close(self) -> None:
        for client in self._clients.take_all():
            client.close()

    def _client(self, account: str, queue: str, sas: str) -> QueueClient:
        return self._clients.get(
            (account.lower(), queue, sas),
            lambda: self._open(account, queue, sas),
        )

    def _open(self, account: str, queue: str, sas: str) -> QueueClient:
        endpoint = self._settings.queue_account_url(account)
        options = {"connection_timeout": CONNECT_TIMEOUT_S, "read_timeout": self._timeout}
        return QueueClient(
            endpoint,
            queue,
            credential=sas.lstrip("?"),
            message_encode_policy=TextBase64EncodePolicy(),
            retry_policy=RETRIES,
            **with_pooled_transport(endpoint, options),
        )


def _failed(what: str, error: Exception, sas: str) -> Performed:
    """A failure, with no trace of the SAS token in what history keeps of it."""
    reason = getattr(error, "reason", None) or ""
    code = getattr(error, "error_code", None) or ""
    code = getattr(code, "value", code)  # an enum: its value is the code as Azure spells it
    status = getattr(error, "status_code", None)
    detail = " ".join(str(part) for part in (status, code or reason) if part)
    if not detail:
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
    detail = _SIGNATURE.sub(r"\1<redacted>", detail.replace(sas.lstrip("?"), "<sas token>"))
    return Performed(False, f"StorageQueue Action - {what}: {detail[:300]}")
