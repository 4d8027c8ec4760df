"""What `azd up` and the Azure Functions host take from this repository: the Bicep templates (parsed
with tree-sitter-bicep, as the Bicep CLI cannot be installed here), the settings with their one
list in shared/settings.py, host.json, function_app.py's declarations, and .funcignore."""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tree_sitter_bicep
from tree_sitter import Language, Node, Parser

from shared.api.routes import CLASSIC_ROUTES, ROUTES
from shared.console.routes import ROUTES as CONSOLE_ROUTES
from shared.settings import (
    EVERY_SETTING,
    STORAGE,
    STORAGE_QUEUE_URI,
    STORAGE_TABLE_URI,
    SettingError,
    Settings,
    max_dequeue_count,
)

ROOT = Path(__file__).resolve().parent.parent
INFRA = ROOT / "infra"
BICEP_FILES = sorted(INFRA.rglob("*.bicep"))
PARSER = Parser(Language(tree_sitter_bicep.language()))

# The newest stable API version of each resource type the templates declare, as of 2026-11.
# A template must use exactly these; moving to a newer one means updating this table too.
CURRENT_API_VERSIONS = {
    "Microsoft.Resources/resourceGroups": "2024-03-01",
    "Microsoft.ManagedIdentity/userAssignedIdentities": "2024-11-30",
    "Microsoft.Storage/storageAccounts": "2025-01-01",
    "Microsoft.Storage/storageAccounts/blobServices": "2025-01-01",
    "Microsoft.Storage/storageAccounts/blobServices/containers": "2025-01-01",
    "Microsoft.OperationalInsights/workspaces": "2025-02-01",
    "Microsoft.Insights/components": "2020-02-02",
    "Microsoft.Insights/actionGroups": "2023-01-01",
    "Microsoft.Insights/scheduledQueryRules": "2023-12-01",
    "Microsoft.Web/serverfarms": "2024-11-01",
    "Microsoft.Web/sites": "2024-11-01",
    "Microsoft.Web/sites/config": "2024-11-01",
    "Microsoft.Authorization/roleAssignments": "2022-04-01",
    "Microsoft.ServiceBus/namespaces": "2024-01-01",
    "Microsoft.ServiceBus/namespaces/authorizationRules": "2024-01-01",
}


def nodes(node: Node, kind: str) -> Iterator[Node]:
    if node.type == kind:
        yield node
    for child in node.children:
        yield from nodes(child, kind)


def parsed(path: Path) -> Node:
    return PARSER.parse(path.read_bytes()).root_node


def text(node: Node) -> str:
    return node.text.decode()


def unquoted(node: Node) -> str:
    return text(node).strip("'")


def broken_parts(root: Node) -> list[str]:
    found: list[str] = []

    def walk(node: Node) -> None:
        if node.is_error or node.is_missing:
            found.append(f"line {node.start_point[0] + 1}: {text(node)[:60]!r}")
        for child in node.children:
            walk(child)

    walk(root)
    return found


def object_keys(declaration: Node) -> set[str]:
    """The property names of the object a `var` declares (top level only)."""
    [body] = [child for child in declaration.children if child.type == "object"]
    properties = [child for child in body.children if child.type == "object_property"]
    return {unquoted(prop.children[0]) for prop in properties}


# --- Bicep ---


def test_there_are_templates_for_every_part() -> None:
    names = {path.relative_to(INFRA).as_posix() for path in BICEP_FILES}
    assert names == {"main.bicep", "app/api.bicep", "app/identity.bicep", "app/monitoring.bicep",
                     "app/rbac.bicep", "app/servicebus.bicep", "app/storage.bicep"}  # fmt: skip


@pytest.mark.parametrize("path", BICEP_FILES, ids=lambda path: path.relative_to(INFRA).as_posix())
def test_each_template_parses_without_errors(path: Path) -> None:
    root = parsed(path)
    assert broken_parts(root) == []
    assert not root.has_error


def test_the_parser_does_find_errors() -> None:
    """So that a clean parse above means something."""
    root = PARSER.parse(b"resource account 'Microsoft.Storage/storageAccounts@2025-01-01' = {\n  name: \n")
    assert root.root_node.has_error


def test_every_resource_uses_a_current_stable_api_version() -> None:
    used: dict[str, set[str]] = {}
    for path in BICEP_FILES:
        for declaration in nodes(parsed(path), "resource_declaration"):
            kind, _, version = unquoted(declaration.children[2]).partition("@")
            used.setdefault(kind, set()).add(version)
    assert set(used) <= set(CURRENT_API_VERSIONS), set(used) - set(CURRENT_API_VERSIONS)
    for kind, versions in used.items():
        assert versions == {CURRENT_API_VERSIONS[kind]}, kind
    assert not any("preview" in version for version in CURRENT_API_VERSIONS.values())


def test_modules_point_at_files_that_exist() -> None:
    for path in BICEP_FILES:
        for module in nodes(parsed(path), "module_declaration"):
            target = path.parent / unquoted(module.children[2])
            assert target.exists(), f"{path.name} uses {target}"


def test_main_parameters_name_parameters_main_declares_and_give_every_required_one() -> None:
    root = parsed(INFRA / "main.bicep")
    declared, required = set(), set()
    for parameter in nodes(root, "parameter_declaration"):
        name = text(parameter.children[1])
        declared.add(name)
        if "=" not in [text(child) for child in parameter.children]:
            required.add(name)
    given = set(json.loads((INFRA / "main.parameters.json").read_text())["parameters"])
    assert given <= declared
    assert required <= given, required - given


def test_sign_in_is_the_platforms_entra_id_authentication_letting_the_app_answer_401() -> None:
    api = (INFRA / "app" / "api.bicep").read_text()
    [auth] = [declaration for declaration in nodes(parsed(INFRA / "app" / "api.bicep"), "resource_declaration")
              if "Microsoft.Web/sites/config@" in text(declaration)]  # fmt: skip
    body = text(auth)
    assert "if (!empty(authClientId))" in body and "name: 'authsettingsV2'" in body
    # Anonymous requests reach the app (the administrator key, /health, the console's page),
    # which answers the rest 401 in ARM's shape.
    assert "requireAuthentication: false" in body and "unauthenticatedClientAction: 'AllowAnonymous'" in body
    assert "azureActiveDirectory" in body and "'api://${authClientId}'" in body
    assert "openIdIssuer: '${environment().authentication.loginEndpoint}${authTenantId}/v2.0'" in body
    # The platform sets WEBSITE_AUTH_ENABLED itself: a template that set it would make the app
    # believe principal headers that nothing replaced.
    [settings] = [var for var in nodes(parsed(INFRA / "app" / "api.bicep"), "variable_declaration")
                  if text(var.children[1]) == "appSettings"]  # fmt: skip
    assert "WEBSITE_AUTH_ENABLED" not in object_keys(settings)
    main = json.loads((INFRA / "main.parameters.json").read_text())["parameters"]
    assert main["authClientId"]["value"] == "${SCHEDULER_AUTH_CLIENT_ID=}"
    assert "@secure()\nparam administratorKey string" in api


def test_storage_admits_identities_only_and_roles_are_the_least_the_app_needs() -> None:
    storage = (INFRA / "app" / "storage.bicep").read_text()
    assert "allowSharedKeyAccess: false" in storage
    assert "allowBlobPublicAccess: false" in storage
    rbac = (INFRA / "app" / "rbac.bicep").read_text()
    roles = set(re.findall(r"'([0-9a-f-]{36})'", rbac))
    assert roles == {
        "b7e6dc6d-f1e8-4753-8033-0f276bb0955b",  # Storage Blob Data Owner: the host's blobs
        "974c5e8b-45b9-4653-ba55-5f855dd0fb88",  # Storage Queue Data Contributor
        "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3",  # Storage Table Data Contributor
        "3913510d-42f4-4e42-8a64-420c390055eb",  # Monitoring Metrics Publisher
    }
    assert "principalType: 'ServicePrincipal'" in rbac and "'User'" not in rbac


def test_the_app_runs_python_313_on_flex_consumption_as_its_identity() -> None:
    api = (INFRA / "app" / "api.bicep").read_text()
    assert re.search(r"name: 'FC1'\s+tier: 'FlexConsumption'", api)
    assert re.search(r"runtime: \{\s+name: 'python'\s+version: '3.13'", api)
    assert "type: 'UserAssigned'" in api
    assert "'azd-service-name': 'api'" in api  # how azd finds the app of azure.yaml's service


def test_the_deployed_python_gets_the_runtime_library_and_azure_functions_2() -> None:
    """From 3.13 on Azure runs the app through azure-functions-runtime, which the app pins: the
    requirements must install it, and the azure-functions 2.x it goes with, on the Python the
    Bicep deploys (and azure-functions 1.x, without the library, on 3.11)."""
    from packaging.requirements import Requirement  # noqa: PLC0415

    version = re.search(r"runtime: \{\s+name: 'python'\s+version: '([0-9.]+)'", (INFRA / "app" / "api.bicep").read_text())
    assert version is not None

    def installed(python: str) -> dict[str, str]:
        pins = {}
        for line in (ROOT / "requirements.txt").read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                requirement = Requirement(line)
                if requirement.marker is None or requirement.marker.evaluate({"python_version": python}):
                    pins[requirement.name] = str(requirement.specifier)
        return pins

    deployed = installed(version.group(1))
    assert deployed["azure-functions-runtime"].startswith("==")
    assert deployed["azure-functions"].startswith("==2.")
    assert "azure-functions-runtime" not in installed("3.11")
    assert installed("3.11")["azure-functions"].startswith("==1.")


def test_azure_yaml_deploys_this_folder_as_a_python_function_app() -> None:
    service = re.search(r"services:\n  api:\n((?:    .*\n)+)", (ROOT / "azure.yaml").read_text())
    assert service is not None
    lines = {line.strip() for line in service.group(1).splitlines()}
    assert lines == {"project: .", "language: python", "host: function"}


# --- settings: one list, three places ---


class Recording(dict[str, str]):
    """An environment that notes every name read from it."""

    def __init__(self, values: dict[str, str]) -> None:
        super().__init__(values)
        self.read: set[str] = set()

    def get(self, name: str, default: Any = None) -> Any:
        self.read.add(name)
        return super().get(name, default)

    def __getitem__(self, name: str) -> str:
        self.read.add(name)
        return super().__getitem__(name)

    def __contains__(self, name: object) -> bool:
        self.read.add(str(name))
        return super().__contains__(name)


def names(*, read_by: str | None = None, sample: bool | None = None, azure: bool | None = None) -> set[str]:
    return {
        setting.name for setting in EVERY_SETTING
        if (read_by is None or read_by in setting.read_by)
        and (sample is None or setting.in_sample == sample)
        and (azure is None or setting.in_azure == azure)
    }  # fmt: skip


def test_the_app_reads_exactly_the_settings_the_list_gives_it() -> None:
    locally = Recording({STORAGE: "UseDevelopmentStorage=true"})
    in_azure = Recording({STORAGE_TABLE_URI: "https://a.table.core.windows.net",
                          STORAGE_QUEUE_URI: "https://a.queue.core.windows.net"})  # fmt: skip
    Settings.from_environment(locally)
    Settings.from_environment(in_azure)
    assert locally.read | in_azure.read == names(read_by="app")


def test_the_app_reads_its_environment_only_through_settings() -> None:
    readers = re.compile(r"os\.environ|os\.getenv|getenv\(")
    sources = [ROOT / "function_app.py", *sorted((ROOT / "shared").rglob("*.py"))]
    offenders = [path.name for path in sources
                 if path.name != "settings.py" and readers.search(path.read_text())]  # fmt: skip
    assert offenders == []


def test_trigger_expressions_and_the_local_host_name_listed_settings(functions: list[Any]) -> None:
    expressions = set()
    for function in functions:
        binding = function.get_trigger().get_dict_repr()
        expressions |= set(re.findall(r"%(\w+)%", json.dumps(binding, default=str)))
    assert expressions == {"SCHEDULER_TICK_SCHEDULE", "SCHEDULER_CLEANUP_SCHEDULE"}
    assert expressions <= names(read_by="host")
    devhost = " ".join(path.read_text() for path in (ROOT / "devhost").glob("*.py"))
    local_names = set(re.findall(r"[\"'](SCHEDULER_\w+|AzureWebJobs\w*|FUNCTIONS_\w+)[\"']", devhost))
    assert local_names <= {setting.name for setting in EVERY_SETTING}, local_names


def test_the_sample_holds_exactly_the_settings_marked_for_it() -> None:
    sample = json.loads((ROOT / "local.settings.sample.json").read_text())["Values"]
    assert set(sample) == names(sample=True)


def test_bicep_sets_exactly_the_settings_marked_for_azure() -> None:
    [declaration] = [var for var in nodes(parsed(INFRA / "app" / "api.bicep"), "variable_declaration")
                     if text(var.children[1]) == "appSettings"]  # fmt: skip
    assert object_keys(declaration) == names(azure=True)


def test_the_settings_page_describes_every_setting() -> None:
    page = (ROOT / "docs" / "settings.md").read_text()
    assert [name for name in sorted(names()) if f"`{name}`" not in page] == []


# --- the Functions host ---


@pytest.fixture(scope="module")
def functions() -> list[Any]:
    import function_app  # noqa: PLC0415 (the app's declarations, as the host indexes them)

    return function_app.app.get_functions()


def test_host_json_is_what_the_functions_host_expects() -> None:
    host = json.loads((ROOT / "host.json").read_text())
    assert host["version"] == "2.0"
    assert host["extensionBundle"] == {"id": "Microsoft.Azure.Functions.ExtensionBundle", "version": "[4.*, 5.0.0)"}
    assert host["extensions"]["http"]["routePrefix"] == ""  # routes are the ARM paths themselves
    hours, minutes, seconds = (int(part) for part in host["functionTimeout"].split(":"))
    assert hours * 3600 + minutes * 60 + seconds > 60  # above the HTTP action's 60 s
    assert host["extensions"]["queues"]["messageEncoding"] == "base64"


def test_the_app_gives_up_at_the_delivery_host_json_names(tmp_path: Path) -> None:
    """The executor records an attempt as failed at the delivery at which the host poisons its
    message: one number, host.json's, read by the app as by the host."""
    assert Settings.from_environment({}).max_dequeue_count == json.loads((ROOT / "host.json").read_text())["extensions"]["queues"]["maxDequeueCount"]
    host_json = tmp_path / "host.json"
    host_json.write_text(json.dumps({"version": "2.0", "extensions": {"queues": {"maxDequeueCount": 3}}}))
    assert max_dequeue_count(host_json) == 3
    host_json.write_text(json.dumps({"version": "2.0"}))
    assert max_dequeue_count(host_json) == 5  # the Functions host's default
    assert max_dequeue_count(tmp_path / "absent.json") == 5
    host_json.write_text(json.dumps({"extensions": {"queues": {"maxDequeueCount": "5"}}}))
    with pytest.raises(SettingError, match="maxDequeueCount"):
        max_dequeue_count(host_json)


def test_the_host_discovers_every_function(functions: list[Any]) -> None:
    found = {function.get_function_name(): function.get_trigger().get_dict_repr()["type"] for function in functions}
    expected = {route.name: "httpTrigger" for route in [*ROUTES, *CLASSIC_ROUTES, *CONSOLE_ROUTES]} | {
        "openapi_document": "httpTrigger", "health_check": "httpTrigger",
        "console_page": "httpTrigger", "console_file": "httpTrigger", "root_to_console": "httpTrigger", "due_attempts_timer": "timerTrigger",
        "retention_timer": "timerTrigger", "executor": "queueTrigger",
    }  # fmt: skip
    assert found == expected


def test_the_queue_trigger_uses_the_storage_connection_bicep_gives_an_identity(functions: list[Any]) -> None:
    [trigger] = [f.get_trigger().get_dict_repr() for f in functions if f.get_function_name() == "executor"]
    assert trigger["connection"] == STORAGE
    assert {f"{STORAGE}__queueServiceUri", f"{STORAGE}__credential", f"{STORAGE}__clientId"} <= names(azure=True)


def test_funcignore_keeps_tests_benchmarks_infra_and_node_modules_out_of_the_package() -> None:
    patterns = [line for line in (ROOT / ".funcignore").read_text().splitlines() if line and not line.startswith("#")]

    def packaged(relative: str) -> bool:
        return not any(fnmatch.fnmatch(part, pattern) for part in relative.split("/") for pattern in patterns)

    for kept in ("function_app.py", "host.json", "requirements.txt", "shared/services.py", "shared/actions/http.py",
                 "shared/domain/schedule/occurrences.py"):
        assert packaged(kept), kept
    for left_out in ("tests/conftest.py", "bench/pipeline.py", "infra/main.bicep", "node_modules/azurite/package.json",
                     "devhost/__main__.py", ".venv/bin/python", "local.settings.json"):
        assert not packaged(left_out), left_out
