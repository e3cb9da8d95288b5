"""Builds deploy/kubernetes/prometheusrule.yaml (a Prometheus Operator PrometheusRule) from the
rule files in deploy/prometheus/rules, so the two never drift.

    prometheusrule.py --write    regenerate the file
    prometheusrule.py --check    exit 1 if the committed file differs (deploy/check.sh)
"""

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ["strata-recording.yml", "strata-alerts.yml"]
OUT = ROOT / "deploy/kubernetes/prometheusrule.yaml"

HEADER = """\
# GENERATED from deploy/prometheus/rules/*.yml by tests/deploy/prometheusrule.py --write;
# deploy/check.sh fails when it is stale. Edit the rule files, not this.
#
# Prometheus Operator: the recording and alerting rules. Add the labels your Prometheus's
# ruleSelector matches (e.g. release: <helm release>) under metadata.labels.
"""


class _Dumper(yaml.SafeDumper):
    """Writes multi-line strings (PromQL, descriptions) as literal blocks, as written by hand."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render() -> str:
    groups = []
    for name in RULES:
        groups += yaml.safe_load((ROOT / "deploy/prometheus/rules" / name).read_text())["groups"]
    doc = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "strata", "labels": {"app.kubernetes.io/name": "strata"}},
        "spec": {"groups": groups},
    }
    return HEADER + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=100)


def main() -> int:
    text = render()
    if sys.argv[1:] == ["--write"]:
        OUT.write_text(text)
        return 0
    if sys.argv[1:] == ["--check"]:
        if OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run tests/deploy/prometheusrule.py --write")
            return 1
        print(f"{OUT.relative_to(ROOT)}: in sync with deploy/prometheus/rules")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
