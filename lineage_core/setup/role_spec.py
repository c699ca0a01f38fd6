"""The values that shape a connector's customer role, shared by the CloudFormation and Terraform renderers.

Both renderers fill these values into static, versioned templates (as CloudFormation parameter
defaults, or as the arguments of a generated Terraform root module), so both create the same role.
"""

from __future__ import annotations

from dataclasses import dataclass

from lineage_core.infra.models import Connector, RotationState


@dataclass(frozen=True)
class RoleSpec:
    vendor_account_id: str
    external_id: str  # the ID exports use now
    role_name: str
    role_path: str
    bucket: str
    prefix: str  # normalised: no leading/trailing '/', '' for the bucket root
    # The account the admin entered; the template refuses to deploy anywhere else.
    customer_account_id: str
    kms_key_arn: str | None = None
    permissions_boundary_arn: str | None = None
    # While an External ID rotation waits for Save, the role trusts this ID as well (both IDs), so the
    # stack can be updated before Save switches exports to it (lineage_core.setup.rotations).
    new_external_id: str | None = None

    @property
    def external_ids(self) -> list[str]:
        """Every External ID the role trusts: the current one, then the new one during a rotation."""
        return [self.external_id, self.new_external_id] if self.new_external_id else [self.external_id]

    @classmethod
    def for_connector(cls, connector: Connector, vendor_account_id: str) -> RoleSpec:
        if not connector.settings_complete:
            raise ValueError("the connector's destination settings are not complete")
        # settings_complete checked them; the assert narrows the Optional types.
        assert connector.role_name and connector.bucket and connector.account_id
        return cls(
            vendor_account_id=vendor_account_id,
            external_id=connector.external_id,
            role_name=connector.role_name,
            role_path=connector.role_path,
            bucket=connector.bucket,
            prefix=connector.prefix,
            customer_account_id=connector.account_id,
            kms_key_arn=connector.kms_key_arn,
            permissions_boundary_arn=connector.permissions_boundary_arn,
            new_external_id=(
                connector.new_external_id if connector.rotation_state is RotationState.PENDING else None
            ),
        )
