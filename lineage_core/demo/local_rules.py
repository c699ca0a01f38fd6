"""CloudFormation's template Rules, for the local demo's deploy (the local endpoint does not check them).

Real CloudFormation refuses to create a stack whose Rules' assertions fail, with the assertion's
``AssertDescription``; our template's only rule says the stack must be created in the account entered
in Foundational. The local AWS endpoint ignores Rules, so "Deploy template to local AWS" evaluates
them here first, with the intrinsic functions Rules allow that our template can use (``Ref``,
``Fn::Equals``, ``Fn::Not``, ``Fn::And``, ``Fn::Or``, ``Fn::Contains``). Production never deploys
templates: the customer does, in the real CloudFormation.
"""

from __future__ import annotations

from typing import Any

import yaml


class RuleError(ValueError):
    """A value the evaluator cannot handle (a function Rules allow but our template does not use)."""


def failed_assertions(template_body: str, account_id: str, region: str) -> list[str]:
    """The ``AssertDescription`` of every assertion that fails, with the parameters' defaults as values."""
    template = yaml.safe_load(template_body)
    values: dict[str, Any] = {
        name: str(parameter.get("Default", "")) for name, parameter in template.get("Parameters", {}).items()
    }
    values |= {"AWS::AccountId": account_id, "AWS::Region": region}
    failures = []
    for rule in (template.get("Rules") or {}).values():
        if "RuleCondition" in rule and not _evaluate(rule["RuleCondition"], values):
            continue
        for assertion in rule.get("Assertions", []):
            if not _evaluate(assertion["Assert"], values):
                failures.append(
                    " ".join(str(assertion.get("AssertDescription", "A template rule failed.")).split())
                )
    return failures


def _evaluate(node: Any, values: dict[str, Any]) -> Any:
    if isinstance(node, str | bool | int | float):
        return node
    if isinstance(node, list):
        return [_evaluate(item, values) for item in node]
    if isinstance(node, dict) and len(node) == 1:
        ((function, argument),) = node.items()
        if function == "Ref":
            if argument not in values:
                raise RuleError(f"Ref to unknown {argument!r}")
            return values[argument]
        arguments = _evaluate(argument, values)
        if function == "Fn::Equals":
            return str(arguments[0]) == str(arguments[1])
        if function == "Fn::Not":
            return not arguments[0]
        if function == "Fn::And":
            return all(arguments)
        if function == "Fn::Or":
            return any(arguments)
        if function == "Fn::Contains":
            return str(arguments[1]) in [str(item) for item in arguments[0]]
    raise RuleError(f"cannot evaluate {node!r} in a rule")
