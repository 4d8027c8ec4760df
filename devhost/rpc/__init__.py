"""The message classes of the Functions RPC protocol, as the runtime library needs them passed in.

`azure-functions-runtime` takes the protocol's message classes from its caller (the proxy worker
in Azure). No package on PyPI ships them under a usable name, so the local host writes the
messages the library uses itself (`function_rpc.proto`) and generates their Python module with
grpcio-tools when it is installed: `python -m devhost.rpc` (which `make` runs). The module lives
in the virtual environment, beside the protobuf version it was generated for, never in the
repository; `messages()` generates it on first use if the installation step was skipped.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

PROTO = Path(__file__).resolve().parent / "function_rpc.proto"
MODULE_NAME = "function_rpc_pb2"


def generated_folder() -> Path:
    """Where the generated module goes: inside the virtual environment when running in one
    (it belongs to that environment's protobuf), otherwise beside the repository."""
    in_venv = sys.prefix != sys.base_prefix
    base = Path(sys.prefix) if in_venv else PROTO.parent.parent.parent / ".devhost-rpc"
    return base / "devhost-rpc"


def generate() -> Path:
    """Generate the Python module from `function_rpc.proto`: its path."""
    from grpc_tools import protoc  # noqa: PLC0415 (only the runtime path needs grpcio-tools)

    folder = generated_folder()
    folder.mkdir(parents=True, exist_ok=True)
    include = Path(protoc.__file__).resolve().parent / "_proto"  # google/protobuf/*.proto
    status = protoc.main(
        ["protoc", f"-I{PROTO.parent}", f"-I{include}", f"--python_out={folder}", str(PROTO)]
    )
    if status != 0:
        raise RuntimeError(f"protoc could not compile {PROTO} (status {status})")
    return folder / f"{MODULE_NAME}.py"


@functools.cache
def messages() -> ModuleType:
    """The generated module (generated first if missing or older than the .proto)."""
    path = generated_folder() / f"{MODULE_NAME}.py"
    if not path.exists() or path.stat().st_mtime < PROTO.stat().st_mtime:
        path = generate()
    spec = importlib.util.spec_from_file_location(f"devhost.rpc.{MODULE_NAME}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
