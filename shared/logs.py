"""What the app's logs may hold: no target's URL, and no line a client forged.

Every logger of the app is made by `app_logger`, whose records are escaped onto one line: a job
or property name is the client's own text, and a newline in it would otherwise start a line of
the client's choosing in the log (or a terminal escape sequence in a console).

HTTP clients log every request at INFO with its whole URL (httpx: `HTTP Request: POST
https://...?sig=...`; azure.core's logging policy: `Request URL: ...`), and a job's URL may carry
a secret in its query string (`?sig=`, `?code=`). Only WARNING and above of theirs are kept.

The Azure Functions Python worker configures the root logger itself, so this only sets the
levels of these named loggers and adds no handler.
"""

from __future__ import annotations

import logging
import re

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


# Control characters (C0, DEL, C1) and Unicode's line and paragraph separators: any of them in a
# log line lets a name a client chose end the line and forge the next one, or drive a terminal.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """`text` with every control character written as its escape (`\\n`, `\\x1b`): one line,
    inert in a terminal."""
    return _UNPRINTABLE.sub(lambda found: found.group().encode("unicode_escape").decode(), text)


class _OneLineRecords(logging.Filter):
    """Writes a record's message on one line before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if _UNPRINTABLE.search(message):
            record.msg, record.args = one_line(message), ()
        return True


_ONE_LINE = _OneLineRecords()


def app_logger(name: str) -> logging.Logger:
    """The app's logger `name`, whose messages are always one line: names, URLs and error texts
    that clients sent are logged as they came, escaped, never as forged lines."""
    logger = logging.getLogger(name)
    if _ONE_LINE not in logger.filters:
        logger.addFilter(_ONE_LINE)
    return logger
