"""What to check, in the admin's words, when the role cannot write: said once for Save and for exports."""

from __future__ import annotations

WRITE_ADVICE = "Check the bucket name, and that the role's policy covers the bucket and prefix."
KMS_ADVICE = " For SSE-KMS, also check that the role may use the key (kms:GenerateDataKey, kms:Decrypt)."


def write_advice(kms: bool) -> str:
    """The advice after a failed write; ``kms`` when a KMS key is configured or KMS refused."""
    return WRITE_ADVICE + (KMS_ADVICE if kms else "")
