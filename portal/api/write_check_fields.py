"""Which settings a failed write check points at, for the API's ``field`` and ``problems``.

The write check (lineage_core.setup.write_check) speaks in the spec's sentences: "Could not assume the
trust role…" when the AWS account ID, role name or External ID do not match the stack, "Could not
write to s3://…" when the role was assumed but the bucket refused. The API answers the sentence as it
is and names the settings the spec's troubleshooting table says to check.
"""

from __future__ import annotations

from lineage_core.infra.models import Connector
from lineage_core.setup.advice import KMS_ADVICE
from portal.api.responses import Problem

TRUST = "Could not assume the trust role"
WRITE = "Could not write to"
TAKEN = "Another connection already exports to"


def write_check_problems(message: str, connector: Connector) -> list[Problem]:
    """The settings to check after this failure, most likely first, each with the check's message."""
    if message.startswith(TRUST):
        fields = ["accountId", "roleName"]
        if connector.role_path != "/":
            fields.append("rolePath")
        code = "trust_role_not_assumable"
    elif message.startswith(TAKEN):
        fields, code = ["prefix"], "destination_taken"
    elif message.startswith(WRITE) and "does not exist" in message:
        fields, code = ["bucket"], "bucket_not_found"
    else:
        fields, code = ["bucket", "prefix"], "write_refused"
        if connector.kms_key_arn and KMS_ADVICE.strip() in message:
            fields.append("kmsKeyArn")
    return [Problem(field, code, message) for field in fields]
