"""The functions run through Azure's Python runtime library, as the proxy worker runs them.

From Python 3.13 on, Azure runs a Python app through `azure-functions-runtime`, which the app
pins in requirements.txt: its handlers index `function_app.py`, load each function, turn each
trigger's data (TypedData) into `azure.functions` objects, call the function (a plain one in the
library's thread pool, an `async def` one on the worker's event loop) and turn what it returns
back into TypedData. When the library is installed, the local host hands it every invocation
the same way: it sends the worker init request (which indexes the app), asks for the function
metadata, loads every function, and for each HTTP request, timer firing or queue message builds
the InvocationRequest that the Functions host would send and reads the InvocationResponse.

What the Functions host does stays the local host's: routes and keys (`http_host`), timers,
queue polling, dequeue counts and poison queues (`triggers`). Its function table comes from the
metadata the library reports (each binding as the app declares it, `raw_bindings`), never from
calling `app.get_functions()` a second time, which the library allows once per app.

The library reads PYTHON_THREADPOOL_THREAD_COUNT itself (`start_threadpool_executor`): no upper
limit; a value that is not a whole number of at least 1 is logged and the default used.
`DEVHOST_INVOCATION=direct` calls the functions directly even where the library is installed.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import azure.functions as func

from devhost.invocation import on_event_loop

INVOCATION = "DEVHOST_INVOCATION"  # "runtime" or "direct"; unset: runtime where installed
LIBRARY = "azure_functions_runtime"


def runtime_installed() -> bool:
    return importlib.util.find_spec(LIBRARY) is not None


def uses_runtime(environment: Mapping[str, str]) -> bool:
    """Whether the functions run through the runtime library: DEVHOST_INVOCATION, or by default
    whenever the library is installed (Python 3.13 and later, from requirements.txt)."""
    chosen = environment.get(INVOCATION, "").strip().lower()
    if chosen not in {"", "runtime", "direct"}:
        raise ValueError(f"{INVOCATION} must be 'runtime' or 'direct', not '{chosen}'")
    if chosen == "runtime" and not runtime_installed():
        raise ValueError(f"{INVOCATION}=runtime, but {LIBRARY} is not installed (Python 3.13+)")
    return chosen != "direct" and runtime_installed()


def describe(environment: Mapping[str, str]) -> str:
    """One line saying which path runs the functions, for the host's start-up output."""
    if uses_runtime(environment):
        from azure_functions_runtime.version import VERSION  # noqa: PLC0415

        return (
            f"Functions run through the Azure Functions Python runtime library "
            f"(azure-functions-runtime {VERSION}, azure-functions {func.__version__})"
        )
    return f"Functions are called directly (azure-functions {func.__version__})"


class RuntimeFailure(RuntimeError):
    """The runtime library answered a request with a failure status."""


@dataclass(frozen=True)
class _Trigger:
    """A trigger binding as the app declares it (function.json's form)."""

    binding: dict[str, Any]

    def get_dict_repr(self) -> dict[str, Any]:
        return self.binding


class RuntimeFunction:
    """One function as the runtime library reports it, in the shape the local host reads
    declared functions in (name, trigger, what to call): calling it invokes it through the
    library."""

    def __init__(self, worker: RuntimeWorker, metadata: Any) -> None:
        self._worker = worker
        self.function_id: str = metadata.function_id
        self.name: str = metadata.name
        self._raw_bindings: list[str] = list(metadata.raw_bindings)
        self.bindings = [json.loads(raw) for raw in self._raw_bindings]
        trigger = [b for b in self.bindings if str(b["type"]).endswith("Trigger")]
        if len(trigger) != 1:
            raise ValueError(f"function {self.name} has {len(trigger)} triggers, not one")
        self._trigger = trigger[0]

    def get_function_name(self) -> str:
        return self.name

    def get_raw_bindings(self) -> list[str]:
        """Each binding as the library reports it: a JSON object, as in function.json."""
        return self._raw_bindings

    def get_trigger(self) -> _Trigger:
        return _Trigger(self._trigger)

    def get_user_function(self) -> Callable[..., Any]:
        """An `async def` the local host calls as it calls any function (devhost.invocation
        runs it on the worker's event loop, as the proxy worker runs the library's handlers)."""

        async def through_runtime(**arguments: Any) -> Any:
            (value,) = arguments.values()
            return await self._worker.invoke(self, value)

        through_runtime.__name__ = self.name
        return through_runtime


class RuntimeWorker:
    """The runtime library in this process, started on the app in `app_directory`."""

    def __init__(self, app_directory: Path) -> None:
        import azure_functions_runtime  # noqa: PLC0415 (installed on Python 3.13+ only)

        from devhost.rpc import messages  # noqa: PLC0415 (generated with grpcio-tools)

        self._library: Any = azure_functions_runtime
        self._protos: ModuleType = messages()
        self._directory = app_directory
        self._serials = itertools.count(1)

    def start(self) -> list[RuntimeFunction]:
        """Init (which indexes the app), metadata, load: the app's functions, ready to invoke."""
        if str(self._directory) not in sys.path:  # the library imports function_app by name
            sys.path.insert(0, str(self._directory))
        return list(on_event_loop(self._start()))

    async def _start(self) -> list[RuntimeFunction]:
        protos, library = self._protos, self._library
        # The proxy worker starts the library's thread pool for plain functions before init; it
        # reads PYTHON_THREADPOOL_THREAD_COUNT.
        library.start_threadpool_executor()
        init = protos.WorkerInitRequest(
            function_app_directory=str(self._directory), host_version="devhost"
        )
        answer = await library.worker_init_request(
            _Request(protos.StreamingMessage(worker_init_request=init),
                     {"protos": protos, "host": "127.0.0.1"})
        )  # fmt: skip
        _check(answer, "worker init (indexing function_app.py)")
        metadata_request = protos.FunctionsMetadataRequest(
            function_app_directory=str(self._directory)
        )
        answer = await library.functions_metadata_request(
            _Request(protos.StreamingMessage(functions_metadata_request=metadata_request))
        )
        _check(answer, "function metadata")
        functions = []
        for metadata in answer.function_metadata_results:
            load = protos.FunctionLoadRequest(function_id=metadata.function_id, metadata=metadata)
            loaded = await library.function_load_request(
                _Request(protos.StreamingMessage(function_load_request=load))
            )
            _check(loaded, f"loading {metadata.name}")
            functions.append(RuntimeFunction(self, metadata))
        return functions

    async def invoke(self, function: RuntimeFunction, value: Any) -> Any:
        """Invoke `function` on its trigger's value (the azure.functions object the local host
        built), as TypedData; what it returned, converted back (an HttpResponse for HTTP)."""
        protos = self._protos
        data, metadata = _typed(protos, function.get_trigger().binding["type"], value)
        request = protos.InvocationRequest(
            invocation_id=f"devhost-{next(self._serials)}",
            function_id=function.function_id,
            input_data=[
                protos.ParameterBinding(name=function.get_trigger().binding["name"], data=data)
            ],
            trigger_metadata=metadata,
        )
        answer = await self._library.invocation_request(
            _Request(protos.StreamingMessage(invocation_request=request))
        )
        _check(answer, f"function {function.name}")
        if answer.HasField("return_value") and answer.return_value.WhichOneof("data") == "http":
            return _http_response(answer.return_value.http)
        return None


@dataclass(frozen=True)
class _Request:
    """What the library's handlers take: the protocol message and, at init, its properties."""

    request: Any
    properties: dict[str, Any] | None = None


def _check(answer: Any, what: str) -> None:
    if answer.result.status != answer.result.Success:
        exception = answer.result.exception
        raise RuntimeFailure(f"{what} failed in the runtime library: {exception.message}")


def _typed(protos: ModuleType, trigger_type: str, value: Any) -> tuple[Any, dict[str, Any]]:
    """The trigger's value as the Functions host sends it: TypedData, and the trigger metadata."""
    if trigger_type == "httpTrigger":
        request: func.HttpRequest = value
        http = protos.RpcHttp(
            method=request.method,
            url=request.url,
            headers=dict(request.headers),
            query=dict(request.params),
            params=dict(request.route_params),
        )
        body = request.get_body()
        if body:  # the library reads a missing body as empty bytes
            http.body.CopyFrom(protos.TypedData(bytes=body))
        return protos.TypedData(http=http), {}
    if trigger_type == "timerTrigger":
        # The timer's information as the host serialises it; without a schedule monitor, no
        # ScheduleStatus (the local host keeps none).
        info = {"Schedule": {"AdjustForDST": True}, "ScheduleStatus": None,
                "IsPastDue": bool(value.past_due)}  # fmt: skip
        return protos.TypedData(json=json.dumps(info)), {}
    if trigger_type == "queueTrigger":
        message: func.QueueMessage = value
        body = message.get_body()
        try:  # the host passes a text message as a string, anything else as bytes
            data = protos.TypedData(string=body.decode("utf-8"))
        except UnicodeDecodeError:
            data = protos.TypedData(bytes=body)
        facts = {
            "Id": protos.TypedData(string=message.id or ""),
            "PopReceipt": protos.TypedData(string=message.pop_receipt or ""),
            "DequeueCount": protos.TypedData(json=json.dumps(message.dequeue_count or 0)),
        }
        for name, moment in (
            ("InsertionTime", message.insertion_time),
            ("ExpirationTime", message.expiration_time),
            ("NextVisibleTime", message.time_next_visible),
        ):
            if isinstance(moment, datetime):
                facts[name] = protos.TypedData(json=json.dumps(moment.isoformat()))
        return data, facts
    raise ValueError(f"the local host does not run {trigger_type} functions")


def _http_response(http: Any) -> func.HttpResponse:
    kind = http.body.WhichOneof("data")
    body: bytes = b""
    if kind == "bytes":
        body = http.body.bytes
    elif kind in {"string", "json"}:
        body = getattr(http.body, kind).encode("utf-8")
    return func.HttpResponse(
        body, status_code=int(http.status_code or 200), headers=dict(http.headers)
    )


def start_worker() -> list[RuntimeFunction]:
    """The runtime library started on this project's function_app.py (it reads its settings
    from the process's environment): the app's functions."""
    return RuntimeWorker(Path(__file__).resolve().parent.parent).start()
