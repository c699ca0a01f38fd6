"""The local demo's "Deploy template to local AWS" button."""

from __future__ import annotations

from lineage_core.demo.local_stack import LocalDeployError, deploy_template, stack_exists, stack_name_for
from lineage_core.infra.config import Settings
from lineage_core.setup import cloudformation
from lineage_core.setup.role_spec import RoleSpec


def deploy_stack(settings: Settings, spec: RoleSpec) -> tuple[bool, str]:
    """Deploy the connector's template locally. Returns (succeeded, message for the admin)."""
    name = stack_name_for(spec.role_name)
    try:
        replaced = stack_exists(settings, name)
        arn = deploy_template(settings, cloudformation.render_template(spec), name)
    except LocalDeployError as error:
        return False, str(error)
    if replaced:
        return True, f"Stack {name} updated on the local AWS endpoint; the role is now {arn}. Now click Save."
    return True, f"Stack {name} deployed to the local AWS endpoint; it created {arn}. Now click Save."
