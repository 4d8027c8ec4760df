"""Which of the libraries' loggers the app keeps quiet, so that no target's URL reaches the logs.

HTTP clients log every request at INFO with its whole URL (httpx: `HTTP Request: POST
https://...?sig=...`; azure.core's logging policy: `Request URL: ...`), and a job's URL may carry
a secret in its query string (`?sig=`, `?code=`). Only WARNING and above of theirs are kept.

The Azure Functions Python worker configures the root logger itself, so this only sets the
levels of these named loggers and adds no handler.
"""

from __future__ import annotations

import logging

QUIETED_LOGGERS = (
    "httpx",  # actions' HTTP requests, each with its URL
    "httpcore",
    "azure",  # the storage and identity SDKs (http_logging_policy), Service Bus and its AMQP
    "uamqp",  # the AMQP library of older Service Bus SDKs
    "pyamqp",
    "urllib3",
    "msal",  # token requests of identity-based storage access
)


def quiet_third_party_loggers() -> None:
    """Keep only warnings and errors of the libraries that log requests with their URLs."""
    for name in QUIETED_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
