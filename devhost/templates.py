"""`python3 -m devhost.templates`: import an ARM template into a running service, or export a
resource group (or one collection) as a template, from a shell (docs/templates.md).

    python3 -m devhost.templates import azuredeploy.json --resource-group my-rg \\
        --parameters azuredeploy.parameters.json --parameter queueName=orders \\
        --value "listKeys(variables('rule'), '2018-01-01-preview')={\\"primaryKey\\": \\"...\\"}" \\
        [--location "West Europe"] [--mode complete] [--what-if]
    python3 -m devhost.templates export --resource-group my-rg [--collection jc] [-o template.json]

Run from the project folder with any Python 3: it runs itself again with the project's
environment (.venv, which `make run` installs) when the one it was started with lacks its
packages. `make templates ARGS="..."` does the same.

The service is --url, by default the one `make run` serves: http://127.0.0.1:$SCHEDULER_PORT
(7071 when unset). The function key is --key, else SCHEDULER_FUNCTION_KEY, else the key `make run`
keeps in .azurite/function-key. The subscription is --subscription, `my-sub` (the quick start's)
when not given. It prints each resource's outcome and a summary; the exit status is 0 when the
import succeeded, 1 when the service refused or stopped it, 2 for a mistake on the command line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, NoReturn, TextIO

from devhost.azurite import FUNCTION_KEY_FILE, ROOT

try:
    import httpx
except ModuleNotFoundError:  # a Python without the project's packages (the system's, say)
    PROJECT_PYTHON = ROOT / ".venv" / "bin" / "python"
    if not PROJECT_PYTHON.exists() or Path(sys.executable) == PROJECT_PYTHON:
        sys.exit(
            "python -m devhost.templates needs the project's packages, in .venv: run `make run` "
            "once (it installs them), then run this again."
        )
    os.execv(PROJECT_PYTHON, [str(PROJECT_PYTHON), "-m", "devhost.templates", *sys.argv[1:]])

from shared.logs import one_line

API_VERSION = "2016-03-01"
DEFAULT_PORT = 7071
DEFAULT_SUBSCRIPTION = "my-sub"  # the quick start's (README)
TIMEOUT_S = 120.0


def main(argv: list[str] | None = None, out: TextIO = sys.stdout) -> int:
    arguments = _parser().parse_args(argv)
    key = arguments.key or os.environ.get("SCHEDULER_FUNCTION_KEY") or _kept_key()
    with httpx.Client(
        base_url=arguments.url.rstrip("/"),
        headers={"x-functions-key": key},
        params={"api-version": API_VERSION},
        timeout=TIMEOUT_S,
    ) as client:
        provider = (
            f"/subscriptions/{arguments.subscription}/resourceGroups/{arguments.resource_group}"
            "/providers/Microsoft.Scheduler"
        )
        try:
            if arguments.command == "import":
                return _import(client, provider, arguments, out)
            return _export(client, provider, arguments, out)
        except httpx.HTTPError as failed:
            print(
                f"the service at {arguments.url} could not be reached ({failed}): is `make run` "
                "running? Another address: --url, or SCHEDULER_PORT.",
                file=out,
            )
            return 1


def _default_url() -> str:
    return f"http://127.0.0.1:{os.environ.get('SCHEDULER_PORT') or DEFAULT_PORT}"


def _kept_key() -> str:
    try:
        return FUNCTION_KEY_FILE.read_text().strip()
    except OSError:
        return ""


def _said(message: object) -> str:
    """A message of the service, on one line and in this command's terms."""
    text = one_line(str(message))
    # The route's body field for a call only Azure answers is this command's --value.
    return re.sub(
        r'in expressionValues under "(.*?)"', lambda found: f"with --value '{found[1]}=JSON'", text
    )


def _import(client: httpx.Client, provider: str, arguments: argparse.Namespace, out: TextIO) -> int:
    body: dict[str, Any] = {
        "template": _json_file(arguments.template),
        "mode": arguments.mode,
        "whatIf": arguments.what_if,
        "parameters": _parameters(arguments),
        "expressionValues": dict(_pair(each, json_value=True) for each in arguments.value),
        "propertyValues": _property_values(arguments.property),
    }
    if arguments.location:
        body["location"] = arguments.location
    if arguments.default_start_time:
        body["defaultStartTime"] = arguments.default_start_time
    doing = "checking (what-if)" if arguments.what_if else f"importing ({arguments.mode})"
    print(f"{doing} {arguments.template} into {arguments.resource_group}...", file=out)
    answer = client.post(f"{provider}/importTemplate", json=body)
    report = _json_answer(answer)
    if answer.status_code == 401:
        print(_KEY_REFUSED, file=out)
        return 1
    for warning in answer.headers.get_list("warning"):
        print(f"  warning: {one_line(warning)}", file=out)
    for resource in report.get("resources", []):
        reason = f" ({resource['reason']})" if resource.get("reason") else ""
        first = f", first run {resource['firstRun']}" if resource.get("firstRun") else ""
        line = f"{resource['outcome']:<11} {resource['type']} {resource['name']}{first}{reason}"
        print(f"  {one_line(line)}", file=out)
        for warning in resource.get("warnings", []):
            print(f"              warning: {one_line(str(warning))}", file=out)
    if "error" in report:
        print(f"failed: {_said(report['error'].get('message'))}", file=out)
    summary = ", ".join(
        f"{count} {outcome}" for outcome, count in report.get("summary", {}).items()
    )
    print(one_line(f"{report.get('status', 'Failed')}: {summary or 'nothing to do'}"), file=out)
    return 0 if answer.status_code == 200 else 1


def _export(client: httpx.Client, provider: str, arguments: argparse.Namespace, out: TextIO) -> int:
    where = (
        f"{provider}/jobCollections/{arguments.collection}" if arguments.collection else provider
    )
    answer = client.post(f"{where}/exportTemplate")
    exported = _json_answer(answer)
    if answer.status_code == 401:
        print(_KEY_REFUSED, file=out)
        return 1
    if answer.status_code != 200:
        message = exported.get("error", {}).get("message", answer.text)
        print(f"failed: {_said(message)}", file=out)
        return 1
    template = exported["template"]
    if not template["resources"]:
        print(
            f"failed: resource group '{arguments.resource_group}' of subscription "
            f"'{arguments.subscription}' has no job collections: nothing was written. Check "
            "--resource-group and --subscription.",
            file=out,
        )
        return 1
    text = json.dumps(template, indent=2) + "\n"
    if arguments.output:
        Path(arguments.output).write_text(text, encoding="utf-8")
        jobs = sum(len(r.get("resources", [])) for r in template["resources"])
        print(
            f"wrote {arguments.output}: {len(template['resources'])} collections, {jobs} jobs, "
            f"{len(template['parameters'])} secrets as securestring parameters",
            file=out,
        )
    else:
        out.write(text)
    return 0


_KEY_REFUSED = (
    "failed: the service refused the function key (HTTP 401). Give the key `make run` printed "
    "with --key or SCHEDULER_FUNCTION_KEY; without either, the key kept in "
    ".azurite/function-key is used."
)


def _parameters(arguments: argparse.Namespace) -> dict[str, Any]:
    """The parameters file's values, then each --parameter name=value over them."""
    values: dict[str, Any] = {}
    if arguments.parameters:
        sent = _json_file(arguments.parameters)
        values = dict(sent.get("parameters", sent))
    for each in arguments.parameter:
        name, value = _pair(each, json_value=False)
        values[name] = {"value": value}
    return values


def _property_values(given: list[str]) -> dict[str, dict[str, Any]]:
    """`--property jc/job:properties.path=value` (a JSON value, or text if it is not JSON)."""
    values: dict[str, dict[str, Any]] = {}
    for each in given:
        resource, colon, rest = each.partition(":")
        if not colon:
            _refuse(f"--property {each!r}: write it as RESOURCE:PATH=VALUE")
        path, value = _pair(rest, json_value=True)
        values.setdefault(resource, {})[path] = value
    return values


def _pair(text: str, *, json_value: bool) -> tuple[str, Any]:
    """`NAME=VALUE`. Where the value is JSON, the name may hold '=' too (an expression's
    strings) and so may the value (base64 keys): the split is the first whose value is JSON."""
    name, equals, value = text.partition("=")
    if not equals or not name:
        _refuse(f"{text!r}: write it as NAME=VALUE")
    if not json_value:
        return name, value
    for at, char in enumerate(text):
        if char == "=" and at:
            try:
                return text[:at], json.loads(text[at + 1 :])
            except ValueError:
                continue
    return name, value


def _json_file(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as failed:
        _refuse(f"{path}: {failed}")


def _refuse(message: str) -> NoReturn:
    """A mistake on the command line: said on stderr, exit status 2 (as argparse's own)."""
    print(f"python -m devhost.templates: {message}", file=sys.stderr)
    raise SystemExit(2)


def _json_answer(answer: httpx.Response) -> dict[str, Any]:
    try:
        read = answer.json()
    except ValueError:
        return {"error": {"message": f"HTTP {answer.status_code}: {answer.text[:200]}"}}
    return read if isinstance(read, dict) else {}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m devhost.templates",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--url", default=_default_url(), help="the service's base URL (default: %(default)s)"
    )
    parser.add_argument(
        "--key",
        help="the function key (default: SCHEDULER_FUNCTION_KEY, else .azurite/function-key)",
    )
    parser.add_argument("--subscription", default=DEFAULT_SUBSCRIPTION, help="default: %(default)s")
    commands = parser.add_subparsers(dest="command", required=True)
    importing = commands.add_parser("import", help="apply a template's Scheduler resources")
    importing.add_argument("template", help="the template's JSON file")
    importing.add_argument("--resource-group", required=True)
    importing.add_argument("--parameters", help="a parameters file (azuredeploy.parameters.json)")
    importing.add_argument(
        "--parameter", action="append", default=[], metavar="NAME=VALUE",
        help="a parameter's value (text), over the file's",
    )  # fmt: skip
    importing.add_argument(
        "--value", action="append", default=[], metavar="EXPRESSION=JSON",
        help="the value of a call only Azure answers, such as listKeys(...)",
    )  # fmt: skip
    importing.add_argument(
        "--property", action="append", default=[], metavar="RESOURCE:PATH=VALUE",
        help="a resource's property, given outright",
    )  # fmt: skip
    importing.add_argument("--location", help="what resourceGroup().location gives")
    importing.add_argument(
        "--default-start-time", metavar="NextWholeMinute|INSTANT",
        help="the startTime of jobs that have none (without it they run at once when imported)",
    )  # fmt: skip
    importing.add_argument("--mode", choices=["incremental", "complete"], default="incremental")
    importing.add_argument("--what-if", action="store_true", help="change nothing; say what would")
    exporting = commands.add_parser("export", help="write collections as a template")
    exporting.add_argument("--resource-group", required=True)
    exporting.add_argument("--collection", help="one collection (default: the whole group)")
    exporting.add_argument("-o", "--output", help="the file to write (default: print it)")
    return parser


if __name__ == "__main__":
    sys.exit(main())
