"""Which path runs the functions: the runtime library where it is installed, unless told not to."""

from __future__ import annotations

import importlib.util

import pytest

from devhost.runtime import describe, uses_runtime

INSTALLED = importlib.util.find_spec("azure_functions_runtime") is not None


def test_by_default_the_library_runs_the_functions_wherever_it_is_installed() -> None:
    assert uses_runtime({}) is INSTALLED
    assert describe({}).startswith("Functions run through" if INSTALLED else "Functions are called directly")


def test_direct_calls_can_be_chosen_anywhere() -> None:
    assert uses_runtime({"DEVHOST_INVOCATION": "direct"}) is False
    assert describe({"DEVHOST_INVOCATION": " Direct "}).startswith("Functions are called directly")


def test_asking_for_the_library_where_it_is_missing_stops_the_host() -> None:
    if INSTALLED:
        assert uses_runtime({"DEVHOST_INVOCATION": "runtime"}) is True
    else:
        with pytest.raises(ValueError, match="azure_functions_runtime is not installed"):
            uses_runtime({"DEVHOST_INVOCATION": "runtime"})


def test_an_unknown_choice_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="DEVHOST_INVOCATION must be 'runtime' or 'direct', not 'grpc'"):
        uses_runtime({"DEVHOST_INVOCATION": "grpc"})
