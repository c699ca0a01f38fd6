"""The connection's page says what the stack update must set: each parameter's value and the CLI command.

CloudFormation's "Replace current template" keeps the stack's current parameter values, so after an edit
or during a rotation the page lists every value (and the card points there); a first deployment, where
the file's defaults apply, does not.
"""

from __future__ import annotations

import html
import re
import shlex

from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from lineage_core.infra.models import Connector, Organization, RotationState
from lineage_core.setup import cloudformation
from lineage_core.setup.role_spec import RoleSpec
from lineage_core.setup.stack_update import STACK_NAME_PLACEHOLDER
from tests.factories import make_connector, make_run
from tests.services import VENDOR_ACCOUNT_ID
from tests.web import FORM, post_form, start_and_fill

CARD = "/integrations/openlineage"


def _deploy_url(connector: Connector) -> str:
    return f"/integrations/openlineage/{connector.id}/deploy"


def _reload(db: Session, connector: Connector) -> Connector:
    db.expire_all()
    found = db.get(Connector, connector.id)
    assert found is not None
    db.rollback()
    return found


def _page(client: FlaskClient, connector: Connector) -> str:
    response = client.get(_deploy_url(connector))
    assert response.status_code == 200
    return str(response.get_data(as_text=True))


def _table(page: str) -> dict[str, str]:
    """Parameter name → the value the table shows ("" for a field to clear), as the admin reads it."""
    rows = re.findall(r'<tr data-parameter="(\w+)">(.*?)</tr>', page, re.DOTALL | re.ASCII)
    values = {}
    for name, row in rows:
        shown = re.search(rf'id="parameter-{name}">(.*?)</span>', row, re.DOTALL)
        if shown is None:
            assert "Empty: clear the field" in row, row
        values[name] = html.unescape(shown.group(1).replace("<wbr>", "")) if shown else ""
    return values


def _command(page: str) -> list[str]:
    """The CLI command's words, as the shell reads the text a Copy gives."""
    match = re.search(r'<pre class="mono" id="update-stack-command">(.*?)</pre>', page, re.DOTALL)
    assert match, "no update-stack command on the page"
    return shlex.split(html.unescape(match.group(1)).replace("\\\n", ""))


def _expected(connector: Connector) -> dict[str, str]:
    return cloudformation.parameter_values(RoleSpec.for_connector(connector, VENDOR_ACCOUNT_ID))


def _sent(words: list[str]) -> dict[str, str]:
    pairs = (word.removeprefix("ParameterKey=").split(",ParameterValue=", 1) for word in words)
    return {name: value for name, value in pairs}


def test_an_edited_connection_lists_every_new_value_and_the_command(
    admin_client: FlaskClient, db: Session, org: Organization
) -> None:
    connector = make_connector(db, org, account_id=FORM["account_id"], role_name=FORM["role_name"])
    make_run(db, connector)
    edited = post_form(
        admin_client, f"/integrations/openlineage/{connector.id}/setup", None, {**FORM, "prefix": "elsewhere"}
    )
    assert edited.headers["Location"].endswith(_deploy_url(connector))
    page = _page(admin_client, connector)
    expected = _expected(_reload(db, connector))
    assert expected["Prefix"] == "elsewhere"

    assert '<h2 id="stack-update-heading">Update the stack</h2>' in page
    text = " ".join(page.split())
    assert "CloudFormation fills the Parameters page with the values the stack has now" in text
    assert _table(page) == expected

    words = _command(page)
    assert words[:3] == ["aws", "cloudformation", "update-stack"]
    assert words[words.index("--stack-name") + 1] == STACK_NAME_PLACEHOLDER
    assert words[words.index("--template-body") + 1] == f"file://{cloudformation.download_name(connector)}"
    assert _sent(words[words.index("--parameters") + 1 :]) == expected


def test_a_pending_rotation_shows_both_external_ids_and_the_card_points_to_them(
    admin_client: FlaskClient, db: Session, org: Organization
) -> None:
    connector = make_connector(db, org)
    current = connector.external_id
    post_form(admin_client, CARD, f"/integrations/openlineage/{connector.id}/rotate-external-id", {})
    connector = _reload(db, connector)
    new = connector.new_external_id
    assert connector.rotation_state is RotationState.PENDING and new

    page = _page(admin_client, connector)
    table = _table(page)
    assert (table["ExternalId"], table["NewExternalId"]) == (current, new)
    assert table == _expected(connector)
    parameters = _sent(_command(page)[_command(page).index("--parameters") + 1 :])
    assert (parameters["ExternalId"], parameters["NewExternalId"]) == (current, new)
    assert 'id="rotation-pending"' in page

    card = admin_client.get(CARD).get_data(as_text=True)
    assert "CloudFormation's Parameters page keeps the stack's current values" in card
    assert f'href="{_deploy_url(connector)}#stack-update"' in card


def test_after_save_verified_the_update_sets_the_new_id_and_clears_new_external_id(
    admin_client: FlaskClient, db: Session, org: Organization
) -> None:
    connector = make_connector(
        db, org, rotation_state=RotationState.VERIFIED, old_external_id="ext-old-0123456789abcdef"
    )
    page = _page(admin_client, connector)
    table = _table(page)
    assert (table["ExternalId"], table["NewExternalId"]) == (connector.external_id, "")
    words = _command(page)
    assert "ParameterKey=NewExternalId,ParameterValue=" in words
    assert f"ParameterKey=ExternalId,ParameterValue={connector.external_id}" in words
    assert 'id="rotation-verified"' in page
    assert "ExternalId is the new External ID and NewExternalId is empty" in page


def test_a_first_deployment_has_no_update_instructions(admin_client: FlaskClient, db: Session) -> None:
    draft = start_and_fill(admin_client, db)
    page = _page(admin_client, draft)
    assert "<h1>Deploy the role in AWS</h1>" in page
    assert 'id="stack-update"' not in page and "update-stack" not in page
