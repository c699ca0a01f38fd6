"""The AWS console's quick-create link for a connection's role stack (beside "Download YAML File").

The link opens CloudFormation's "Quick create stack" page with the **static, public** template (the
same file for every customer, served from ``CFN_TEMPLATE_BASE_URL``) and this connection's values as
``param_…`` query parameters, so the admin reviews and creates the stack without uploading a file.
Nothing secret is in it: the parameters are the ones the downloaded template carries as defaults (the
External ID is a shared identifier, not a password: AWS's confused-deputy guidance), and no
credential or signed URL is involved. Without a configured template URL (the local demo) there is no
link: the console could not reach a template on this machine.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from lineage_core.infra.config import Settings
from lineage_core.infra.models import Connector
from lineage_core.setup import cloudformation
from lineage_core.setup.destination import partition_for_region
from lineage_core.setup.role_spec import RoleSpec

STACK_NAME = "FoundationalOpenLineageExport"  # the spec's example stack name (Part 2, step 4)
_CONSOLES = {
    "aws": "https://console.aws.amazon.com",
    "aws-cn": "https://console.amazonaws.cn",
    "aws-us-gov": "https://console.amazonaws-us-gov.com",
}


def template_url(settings: Settings) -> str | None:
    if not settings.cfn_template_base_url:
        return None
    return settings.cfn_template_base_url + cloudformation.TEMPLATE_PATH.name


def quick_create_url(settings: Settings, spec: RoleSpec, region: str) -> str | None:
    """The console link for ``spec``, or None when no public template URL is configured.

    Parameters the connection leaves empty are left out: the template's own defaults are those.
    """
    template = template_url(settings)
    if template is None:
        return None
    query = {"templateURL": template, "stackName": STACK_NAME}
    query |= {
        f"param_{name}": value for name, value in cloudformation.parameter_values(spec).items() if value
    }
    console = _CONSOLES.get(partition_for_region(region), _CONSOLES["aws"])
    fragment = "/stacks/create/review?" + urlencode(query, quote_via=quote)
    return f"{console}/cloudformation/home?{urlencode({'region': region})}#{fragment}"


def url_for_connector(settings: Settings, connector: Connector) -> str | None:
    if not connector.settings_complete:
        return None
    spec = RoleSpec.for_connector(connector, settings.vendor_account_id)
    return quick_create_url(settings, spec, settings.aws_region)
