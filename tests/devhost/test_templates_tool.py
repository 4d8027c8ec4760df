"""`python -m devhost.templates` against the local host: import with progress and a summary,
export to a file, and the exit status a script can act on."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from devhost import templates
from devhost.azurite import ROOT
from devhost.templates import main
from tests.api.test_templates import QUICKSTARTS, RULE_KEYS
from tests.conftest import SAS_KEY, SAS_KEY_NAME, Service


def run(service: Service, *arguments: str) -> tuple[int, str]:
    out = io.StringIO()
    status = main(["--url", service.base_url, "--key", service.key, *arguments], out=out)
    return status, out.getvalue()


def test_a_quickstart_imported_from_the_shell_then_exported_to_a_file(service: Service, tmp_path: Path) -> None:
    group = f"rg-{uuid.uuid4().hex[:8]}"
    keys = json.dumps({"primaryKey": SAS_KEY, "keyName": SAS_KEY_NAME})
    arguments = [
        "import", str(QUICKSTARTS / "scheduler-service-bus.json"), "--resource-group", group,
        "--parameters", str(QUICKSTARTS / "scheduler-service-bus.parameters.json"),
        "--parameter", "queueName=orders", "--parameter", "serviceBusNamespaceName=contoso-bus",
        "--location", "West Europe", "--value", f"{RULE_KEYS}={keys}",
    ]  # fmt: skip
    status, printed = run(service, *arguments, "--what-if")
    assert status == 0, printed
    assert printed.splitlines()[0].startswith("checking (what-if)")
    assert "Succeeded: 3 Skipped, 2 Created" in printed
    status, printed = run(service, *arguments)
    assert status == 0, printed
    assert "  Created     Microsoft.Scheduler/jobCollections/jobs QueuePoster/PostMessage" in printed
    written = tmp_path / "exported.json"
    status, printed = run(service, "export", "--resource-group", group, "-o", str(written))
    assert status == 0, printed
    assert printed == f"wrote {written}: 1 collections, 1 jobs, 1 secrets as securestring parameters\n"
    assert SAS_KEY not in written.read_text()


def test_a_refused_import_exits_1_and_says_why(service: Service) -> None:
    status, printed = run(service, "import", str(QUICKSTARTS / "scheduler-webapp.json"), "--resource-group", "rg-refused", "--location", "West Europe")
    assert status == 1
    assert (  # every parameter without a default named at once, not the first one found
        "failed: parameters: 4 have no default value and none was given: "
        "'appSvcPlanName', 'webAppName', 'jobCollectionName', 'jobName'\nFailed: nothing to do"
    ) in printed


def test_names_from_the_server_reach_the_terminal_escaped(service: Service, tmp_path: Path) -> None:
    # A resource the service skips keeps the name the template gave it, whatever it holds.
    name = "site\x1b[2J\nSucceeded: 0 Skipped"
    template = {
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "resources": [{"type": "Microsoft.Web/sites", "apiVersion": "2022-03-01", "name": name}],
    }
    written = tmp_path / "escapes.json"
    written.write_text(json.dumps(template))
    status, printed = run(service, "import", str(written), "--resource-group", "rg-escapes", "--what-if")
    assert status == 0, printed
    assert "\x1b" not in printed
    [skipped] = [line for line in printed.splitlines() if "Microsoft.Web/sites" in line]
    assert "site\\x1b[2J\\nSucceeded: 0 Skipped" in skipped
    assert printed.splitlines()[-1] == "Succeeded: 1 Skipped"


def as_a_user_would(service: Service, *arguments: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
    """The command from the project folder with a Python that lacks the project's packages
    (`-S`: no site-packages), the service found by SCHEDULER_PORT alone."""
    environment = {**os.environ, "SCHEDULER_PORT": str(urlsplit(service.base_url).port)}
    environment["SCHEDULER_FUNCTION_KEY"] = service.key if key is None else key
    bare = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    command = [str(bare), "-S", "-m", "devhost.templates", *arguments]
    return subprocess.run(command, check=False, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60)


def test_run_from_a_bare_python_it_uses_the_projects_environment_and_the_port_setting(service: Service) -> None:
    ran = as_a_user_would(service, "export", "--resource-group", "rg-never-made")
    assert ran.returncode == 1, ran.stderr
    assert ran.stdout == (
        "failed: resource group 'rg-never-made' of subscription 'my-sub' has no job collections: "
        "nothing was written. Check --resource-group and --subscription.\n"
    )


def test_a_wrong_key_is_answered_with_where_the_key_comes_from(service: Service) -> None:
    ran = as_a_user_would(service, "export", "--resource-group", "rg-any", key="not-the-key")
    assert ran.returncode == 1, ran.stderr
    assert "the service refused the function key (HTTP 401)" in ran.stdout
    assert "--key or SCHEDULER_FUNCTION_KEY" in ran.stdout


def test_a_value_only_azure_knows_is_asked_for_as_the_commands_own_flag(service: Service) -> None:
    arguments = [
        "import", str(QUICKSTARTS / "scheduler-webapp.json"), "--resource-group", "rg-webapp",
        "--parameter", "appSvcPlanName=plan", "--parameter", "webAppName=contoso",
        "--parameter", "jobCollectionName=webjobs", "--parameter", "jobName=ping", "--location", "West Europe",
    ]  # fmt: skip
    status, printed = run(service, *arguments, "--what-if")
    assert status == 1
    assert "with --value 'reference(resourceId('Microsoft.Web/sites', parameters('webAppName')))=JSON'" in printed
    assert "expressionValues" not in printed


def test_the_key_make_run_keeps_is_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = tmp_path / "function-key"
    kept.write_text("the-kept-key\n")
    monkeypatch.setattr(templates, "FUNCTION_KEY_FILE", kept)
    assert templates._kept_key() == "the-kept-key"
    monkeypatch.setattr(templates, "FUNCTION_KEY_FILE", tmp_path / "missing")
    assert templates._kept_key() == ""


def test_each_job_says_when_it_first_runs_and_a_default_start_time_can_be_given(service: Service) -> None:
    keys = json.dumps({"primaryKey": SAS_KEY, "keyName": SAS_KEY_NAME})
    arguments = [
        "import", str(QUICKSTARTS / "scheduler-service-bus.json"), "--resource-group", f"rg-{uuid.uuid4().hex[:8]}",
        "--parameter", "serviceBusNamespaceName=contoso-bus", "--location", "West Europe",
        "--value", f"{RULE_KEYS}={keys}", "--what-if",
    ]  # fmt: skip
    status, printed = run(service, *arguments)
    assert status == 0, printed
    [job] = [line for line in printed.splitlines() if "QueuePoster/PostMessage" in line]
    assert ", first run 20" in job
    assert "warning: no startTime: it runs at once when imported" in printed
    status, printed = run(service, *arguments, "--default-start-time", "NextWholeMinute")
    assert status == 0, printed
    assert "no startTime" not in printed
    assert re.search(r"QueuePoster/PostMessage, first run \d{4}-\d\d-\d\dT\d\d:\d\d:00Z", printed), printed
