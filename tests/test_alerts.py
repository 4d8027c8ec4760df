"""The alert rules of infra/app/monitoring.bicep, read with tree-sitter-bicep: the four the service
needs, on by default, sent to the e-mail address main.bicep takes, and querying only metrics and
attributes that shared/telemetry.py records (a renamed metric would silence an alert)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from shared.telemetry import EXECUTION_SPAN, OUTCOMES
from tests.test_deployment import INFRA, ROOT, nodes, parsed, text, unquoted

MONITORING = INFRA / "app" / "monitoring.bicep"
TELEMETRY = (ROOT / "shared" / "telemetry.py").read_text()
# Application Insights' log alerts evaluate windows of these lengths.
WINDOWS = {"PT1M", "PT5M", "PT10M", "PT15M", "PT30M", "PT45M", "PT1H"}


def value(node: Any) -> Any:
    if node.type == "string":
        return unquoted(node).strip("'")
    if node.type == "number":
        return int(text(node))
    if node.type == "array":
        return [value(child) for child in node.children if child.type not in ("[", "]", ",")]
    return text(node)  # an expression: a parameter's name


def alerts() -> dict[str, dict[str, Any]]:
    [declaration] = [var for var in nodes(parsed(MONITORING), "variable_declaration")
                     if text(var.children[1]) == "alerts"]  # fmt: skip
    [array] = [child for child in declaration.children if child.type == "array"]
    found = {}
    for entry in (child for child in array.children if child.type == "object"):
        properties = {text(prop.children[0]): value(prop.children[2])
                      for prop in entry.children if prop.type == "object_property"}  # fmt: skip
        found[properties["name"]] = properties
    return found


def parameter_defaults(path: Path) -> dict[str, str]:
    defaults = {}
    for parameter in nodes(parsed(path), "parameter_declaration"):
        parts = [text(child) for child in parameter.children]
        if "=" in parts:
            defaults[parts[1]] = parts[parts.index("=") + 1]
    return defaults


def recorded_metrics() -> set[str]:
    return set(re.findall(r'"(scheduler\.[a-z_.]+)"', TELEMETRY))


def test_there_is_an_alert_for_failures_poison_a_silent_timer_and_lateness() -> None:
    assert set(alerts()) == {"executions-failed", "poison-messages", "timer-silent", "lateness-p95"}


def test_each_alert_queries_only_metrics_and_attributes_the_app_records() -> None:
    for name, alert in alerts().items():
        queried = set(re.findall(r'name == "(scheduler\.[a-z_.]+)"', alert["query"]))
        assert queried <= recorded_metrics(), name
        for attribute in re.findall(r'customDimensions(?:\.(\w+)|\["([\w.]+)"\])', alert["query"]):
            assert f'"{"".join(attribute)}"' in TELEMETRY, (name, attribute)
        for span in re.findall(r'requests\s*\|\s*where name == "(\w+)"', alert["query"]):
            assert span == EXECUTION_SPAN, name
        assert alert["window"] in WINDOWS and alert["frequency"] in WINDOWS, name
        if alert["measure"]:
            assert re.search(rf"\b{alert['measure']} =", alert["query"]), name


def test_the_failure_alert_fires_on_any_failed_or_faulted_execution_per_job() -> None:
    failed = alerts()["executions-failed"]
    assert set(re.findall(r'"(\w+)"', failed["query"].split("in (")[1])) == {"failed", "faulted"} <= set(OUTCOMES)
    assert (failed["operator"], failed["threshold"], failed["window"]) == ("GreaterThan", 0, "PT5M")
    assert failed["dimensions"] == ["collection", "job"]


def test_the_poison_timer_and_lateness_alerts_have_their_thresholds() -> None:
    found = alerts()
    assert (found["poison-messages"]["operator"], found["poison-messages"]["threshold"]) == ("GreaterThan", 0)
    timer = found["timer-silent"]
    assert "ago(${timerSilentMinutes}m)" in timer["query"]
    assert (timer["aggregation"], timer["operator"], timer["threshold"]) == ("Count", "LessThan", 1)
    assert timer["frequency"] == "PT1M"
    lateness = found["lateness-p95"]
    assert "percentile(" in lateness["query"] and ", 95)" in lateness["query"]
    assert lateness["threshold"] == "latenessP95ThresholdMs"
    defaults = parameter_defaults(MONITORING)
    assert defaults["timerSilentMinutes"] == "3"
    assert int(defaults["latenessP95ThresholdMs"]) > 0


def test_alerts_are_on_by_default_and_mail_the_address_main_takes() -> None:
    monitoring = MONITORING.read_text()
    assert parameter_defaults(MONITORING)["alertsEnabled"] == "true"
    assert "enabled: alertsEnabled" in monitoring
    assert "actionGroups: [alertGroup.id]" in monitoring
    assert "emailAddress: alertEmailAddress" in monitoring
    main = parameter_defaults(INFRA / "main.bicep")
    assert main["alertsEnabled"] == "true"
    assert main["alertEmailAddress"] == "''"
    main_text = (INFRA / "main.bicep").read_text()
    for passed in ("alertsEnabled", "alertEmailAddress", "latenessP95ThresholdMs"):
        assert f"{passed}: {passed}" in main_text
    assert "${ALERT_EMAIL_ADDRESS=}" in (INFRA / "main.parameters.json").read_text()


@pytest.mark.parametrize("name", ["executions-failed", "poison-messages", "timer-silent", "lateness-p95"])
def test_deployment_md_documents_each_alert(name: str) -> None:
    assert f"`{name}`" in (ROOT / "docs" / "deployment.md").read_text()
