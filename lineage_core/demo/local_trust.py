"""What real STS would refuse, checked against the local AWS endpoint before the demo assumes a role.

The local endpoint (moto) lets anyone assume any role ARN, whatever its account, trust policy or
External ID, so in the demo Save would pass before the stack exists, or with a wrong account ID, and
the spec's "Could not assume the trust role…" could never be seen. In local mode only, the write
check first asks the local IAM what real AWS would enforce: the role exists in the account entered,
and its trust policy lets our account assume it with this connection's External ID. Production
(``LOCAL_MODE`` off) never calls this: there, STS itself decides.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

from botocore.exceptions import BotoCoreError, ClientError

from lineage_core.demo.local_stack import local_account_id
from lineage_core.infra.aws import vendor_client
from lineage_core.infra.aws_errors import error_code
from lineage_core.infra.config import Settings
from lineage_core.setup.destination import Destination


def trust_problem(settings: Settings, destination: Destination) -> str | None:
    """Why real STS would refuse to let us assume the destination's role, or None if it would not."""
    account = local_account_id(settings)
    role_name = destination.role_arn.rsplit("/", 1)[-1]
    if destination.account_id != account:
        return (
            f"there is no role {role_name} in AWS account {destination.account_id} "
            f"(the local AWS endpoint is account {account} only)"
        )
    try:
        role = vendor_client(settings, "iam").get_role(RoleName=role_name)["Role"]
    except ClientError as error:
        if error_code(error) == "NoSuchEntity":
            return f"there is no role {role_name} in AWS account {account}"
        return f"the local IAM could not be asked about the role ({error_code(error)})"
    except BotoCoreError as error:
        return f"the local AWS endpoint did not answer ({type(error).__name__})"
    if role.get("Arn") != destination.role_arn:
        return f"the role in account {account} is {role.get('Arn')}, not {destination.role_arn}"
    if not _trusts(
        _document(role.get("AssumeRolePolicyDocument")), settings.vendor_account_id, destination.external_id
    ):
        return (
            f"the role's trust policy does not let Foundational's account {settings.vendor_account_id} "
            "assume it with this External ID"
        )
    return None


def _document(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return dict(json.loads(unquote(value)))
    return dict(value or {})


def _listed(value: Any) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else [str(value)]


def _trusts(policy: dict[str, Any], vendor_account: str, external_id: str) -> bool:
    statements = policy.get("Statement", [])
    for statement in statements if isinstance(statements, list) else [statements]:
        if statement.get("Effect") != "Allow" or "sts:AssumeRole" not in _listed(statement.get("Action", [])):
            continue
        principal = statement.get("Principal", {})
        principals = _listed(principal.get("AWS", [])) if isinstance(principal, dict) else _listed(principal)
        if not any(p == vendor_account or p.endswith(f":iam::{vendor_account}:root") for p in principals):
            continue
        condition = statement.get("Condition", {}).get("StringEquals", {})
        if external_id in _listed(condition.get("sts:ExternalId", [])):
            return True
    return False
