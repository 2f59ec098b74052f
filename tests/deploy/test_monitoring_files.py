"""deploy/prometheus and deploy/grafana are imported as they are: the rules file follows
Prometheus' rule-file format exactly, every rule and panel asks only for metrics that GET /metrics
exposes, and Prometheus' own promtool accepts the rules and passes their cases
(report-console-rules.test.yml: which alert fires, and which does not, on which series)."""

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from reports.kinds import KINDS
from reports.models import ApiScope
from reports.services.tokens import create_api_token
from tests.debian_packages import installed_program, missing_program_message
from tests.factories import make_dead_letter

BASE_DIR = Path(__file__).resolve().parents[2]
RULES = BASE_DIR / "deploy" / "prometheus" / "report-console-rules.yml"
DASHBOARD = BASE_DIR / "deploy" / "grafana" / "report-console.json"
RULE_CASES = Path(__file__).with_name("report-console-rules.test.yml")
# Prometheus' own series for each scrape target, beside what /metrics exposes.
PROMETHEUS_SERIES = {"up"}

DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
RULE_NAME = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*$")
PROMQL_WORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "offset",
    "and",
    "or",
    "unless",
    "bool",
}


def check_alerting_rule(rule: dict) -> None:
    """Prometheus' rule-file schema for an alerting rule, unknown keys refused (as promtool does)."""
    assert set(rule) <= {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}, rule
    assert isinstance(rule.get("alert"), str) and RULE_NAME.match(rule["alert"]), rule
    assert isinstance(rule.get("expr"), str) and rule["expr"].strip(), rule
    for key in ("for", "keep_firing_for"):
        if key in rule:
            assert isinstance(rule[key], str) and DURATION.match(rule[key]), rule
    for key in ("labels", "annotations"):
        mapping = rule.get(key, {})
        assert isinstance(mapping, dict), rule
        for name, text in mapping.items():
            assert LABEL_NAME.match(name) and isinstance(text, str), (key, name)


def check_rule_file(document) -> list[dict]:
    assert isinstance(document, dict) and set(document) == {"groups"}
    assert isinstance(document["groups"], list) and document["groups"]
    names, rules = set(), []
    for group in document["groups"]:
        assert set(group) <= {"name", "interval", "limit", "query_offset", "rules", "labels"}, group
        assert isinstance(group.get("name"), str) and group["name"] not in names
        names.add(group["name"])
        if "interval" in group:
            assert DURATION.match(group["interval"])
        assert isinstance(group.get("rules"), list) and group["rules"]
        for rule in group["rules"]:
            check_alerting_rule(rule)
            rules.append(rule)
    return rules


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: no strings, label matchers, ranges or
    functions, no keywords, no numbers."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\boffset\s+\S+", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word, rest = match.group(0), text[match.end() :].lstrip()
        if rest.startswith("(") or word in PROMQL_WORDS:
            continue  # a function or an aggregation
        names.add(word)
    return names


@pytest.fixture
def exposed_names(db, client) -> set[str]:
    make_dead_letter()  # so that every family has samples
    raw = create_api_token(name="prometheus", scopes=[ApiScope.METRICS])[1]
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {raw}").content.decode()
    families = list(text_string_to_metric_families(text))
    # A family without samples (no bulk run yet) is still announced by its HELP and TYPE lines.
    return {family.name for family in families} | {
        sample.name for family in families for sample in family.samples
    }


def test_the_rules_file_is_a_valid_prometheus_rule_file():
    rules = check_rule_file(yaml.safe_load(RULES.read_text()))
    assert {rule["alert"] for rule in rules} >= {
        "ReportDeadLetterBacklogGrowing",
        "ReportNewDeadLetterCause",
        "ReportNoLiveWorker",
        "ReportAlertsNotDelivered",
    }


@pytest.mark.parametrize(
    "broken",
    [
        {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "x", "for": "5 minutes"}]}]},
        {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "x", "severity": "page"}]}]},
        {"groups": [{"name": "g", "rules": [{"alert": "A B", "expr": "x"}]}]},
        {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "x", "labels": {"bad-name": "1"}}]}]},
        {"rules": []},
    ],
)
def test_the_schema_check_refuses_what_prometheus_refuses(broken):
    with pytest.raises(AssertionError):
        check_rule_file(broken)


def test_the_name_reader_sees_through_promql():
    expr = (
        'sum by (kind) (rate(report_a_total{kind=~"x|y"}[5m])) - report_b offset 1h unless on(q) report_c > 2'
    )
    assert metric_names(expr) == {"report_a_total", "report_b", "report_c"}


def test_every_rule_asks_only_for_exposed_metrics(exposed_names):
    for rule in check_rule_file(yaml.safe_load(RULES.read_text())):
        names = metric_names(rule["expr"])
        assert names and names <= exposed_names | PROMETHEUS_SERIES, (rule["alert"], names - exposed_names)


@pytest.fixture(scope="module")
def promtool() -> str:
    """Debian's promtool (package prometheus), installed when missing and this process may."""
    found = installed_program("prometheus", "promtool")
    if not found:
        pytest.fail(missing_program_message("prometheus", "promtool for the rules' cases"), pytrace=False)
    return found


def test_promtool_accepts_the_rules_and_their_cases_pass(promtool):
    for argv in (["check", "rules", str(RULES)], ["test", "rules", str(RULE_CASES)]):
        result = subprocess.run([promtool, *argv], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
    cases = RULE_CASES.read_text()
    for alert in ("ReportNewDeadLetterCause", "ReportMetricsScrapeFailing"):
        assert f"alertname: {alert}" in cases


def test_every_dashboard_panel_asks_only_for_exposed_metrics(exposed_names):
    dashboard = json.loads(DASHBOARD.read_text())
    targets = [target for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(targets) >= 10
    for target in targets:
        names = metric_names(target["expr"].replace("$kind", "x"))
        assert names and names <= exposed_names, (target["expr"], names - exposed_names)


def test_the_dashboards_kind_variable_lists_every_kind_on_an_idle_site(db, client):
    """Grafana fills `$kind` from a metric's samples: with no task waiting or running, every kind is
    still there (at 0), so the variable and the panels filtered by it are never empty."""
    [variable] = [v for v in json.loads(DASHBOARD.read_text())["templating"]["list"] if v["name"] == "kind"]
    metric, label = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable["definition"]).groups()
    raw = create_api_token(name="prometheus", scopes=[ApiScope.METRICS])[1]
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {raw}").content.decode()

    families = text_string_to_metric_families(text)

    assert {s.labels[label] for family in families for s in family.samples if s.name == metric} == set(KINDS)

