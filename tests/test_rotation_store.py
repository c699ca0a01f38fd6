"""The External ID rotation in the connector store (lineage_core.setup.rotations), on PostgreSQL.

Start, cancel, Save's verification and the old ID's checks change the connector's ID columns as the
state machine says; the database itself keeps every External ID unique and the columns consistent with
the state; the downloads follow the state.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.db import session_factory
from lineage_core.infra.models import Connector, ConnectorStatus, Organization, RotationState
from lineage_core.setup import cloudformation, rotations, terraform_bundle
from lineage_core.setup.destination import EXTERNAL_ID_PATTERN, new_external_id
from lineage_core.setup.role_spec import RoleSpec
from lineage_core.setup.rotations import RotationError
from lineage_core.setup.write_check import WriteCheckResult
from tests.factories import ROLE_ARN, make_connector, make_org
from tests.services import VENDOR_ACCOUNT_ID

CHECKED_AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
PASSED = WriteCheckResult(role_arn=ROLE_ARN, bucket_region="us-east-1")


def _fresh(db: Session, connector: Connector) -> Connector:
    db.commit()
    db.expire_all()
    found = db.get(Connector, connector.id)
    assert found is not None
    return found


def _trusted(connector: Connector) -> object:
    spec = RoleSpec.for_connector(connector, VENDOR_ACCOUNT_ID)
    return cloudformation.expected_policies(spec)["trust_policy"]["Statement"][0]["Condition"][
        "StringEquals"
    ]["sts:ExternalId"]


def test_start_mints_a_new_id_that_the_downloads_trust_beside_the_current_one(
    db: Session, org: Organization
) -> None:
    connector = make_connector(db, org)
    current = connector.external_id
    rotations.start_rotation(db, connector)
    connector = _fresh(db, connector)

    assert connector.rotation_state is RotationState.PENDING
    assert connector.external_id == current  # exports keep using it
    new = connector.new_external_id
    assert new and new != current and EXTERNAL_ID_PATTERN.match(new)
    assert _trusted(connector) == [current, new]
    spec = RoleSpec.for_connector(connector, VENDOR_ACCOUNT_ID)
    assert cloudformation.parameter_values(spec)["NewExternalId"] == new
    assert f'new_external_id   = "{new}"' in terraform_bundle.root_snippet(spec)
    # Save checks the new ID; exports (the stored external_id) still the current one.
    assert rotations.save_destination(connector, "aws").external_id == new


def test_a_second_start_is_refused_and_changes_nothing(db: Session, org: Organization) -> None:
    connector = make_connector(db, org)
    rotations.start_rotation(db, connector)
    new = _fresh(db, connector).new_external_id
    with pytest.raises(RotationError, match="A new External ID is already waiting for Save"):
        rotations.start_rotation(db, connector)
    db.rollback()
    assert _fresh(db, connector).new_external_id == new


def test_a_start_by_a_request_that_read_the_row_before_another_started_is_refused(
    settings: Settings, db: Session, org: Organization
) -> None:
    """Two admins press "Rotate External ID" at once: the second one's stale row is read again, locked."""
    connector = make_connector(db, org)
    other = session_factory(settings.database_url)()
    try:
        stale = other.get(Connector, connector.id)
        assert stale is not None and stale.rotation_state is RotationState.NONE
        rotations.start_rotation(db, connector)
        db.commit()
        with pytest.raises(RotationError, match="already waiting for Save"):
            rotations.start_rotation(other, stale)
    finally:
        other.close()


def test_a_draft_cannot_rotate(db: Session, org: Organization) -> None:
    draft = make_connector(db, org, status=ConnectorStatus.DRAFT)
    with pytest.raises(RotationError, match="Finish the setup and click Save first"):
        rotations.start_rotation(db, draft)


def test_cancel_returns_to_the_current_id_only(db: Session, org: Organization) -> None:
    connector = make_connector(db, org)
    current = connector.external_id
    rotations.start_rotation(db, connector)
    rotations.cancel_rotation(db, connector)
    connector = _fresh(db, connector)
    assert (connector.rotation_state, connector.new_external_id) == (RotationState.NONE, None)
    assert connector.external_id == current
    assert _trusted(connector) == current  # one ID: a string, as before any rotation
    with pytest.raises(RotationError, match="There is no External ID rotation to cancel"):
        rotations.cancel_rotation(db, connector)


def test_save_with_the_new_id_switches_exports_to_it_and_keeps_the_old_one_to_check(
    db: Session, org: Organization
) -> None:
    connector = make_connector(db, org)
    current = connector.external_id
    rotations.start_rotation(db, connector)
    new = connector.new_external_id
    activation = rotations.activate_checked(connector, PASSED)
    connector = _fresh(db, connector)

    assert activation == rotations.Activation(newly_active=False, rotation_verified=True)
    assert connector.rotation_state is RotationState.VERIFIED
    assert (connector.external_id, connector.old_external_id, connector.new_external_id) == (
        new,
        current,
        None,
    )
    assert rotations.old_id_to_check(connector) == current
    assert _trusted(connector) == new  # the downloads now drop the old ID
    with pytest.raises(RotationError, match="can no longer be cancelled"):
        rotations.cancel_rotation(db, connector)
    db.rollback()
    # A Save without a rotation pending is just Save.
    assert rotations.activate_checked(connector, PASSED).rotation_verified is False


def test_the_old_ids_checks_are_recorded_and_the_first_refusal_completes_the_rotation(
    db: Session, org: Organization
) -> None:
    connector = make_connector(db, org)
    current = connector.external_id
    rotations.start_rotation(db, connector)
    rotations.activate_checked(connector, PASSED)
    db.commit()

    assert rotations.record_old_id_check(db, connector.id, current, True, CHECKED_AT) is not None
    connector = _fresh(db, connector)
    assert (connector.rotation_state, connector.old_external_id_works) == (RotationState.VERIFIED, True)
    assert connector.old_external_id_checked_at == CHECKED_AT

    # A check of some other ID (a stale result from before another rotation) records nothing.
    assert rotations.record_old_id_check(db, connector.id, new_external_id(), False, CHECKED_AT) is None

    later = CHECKED_AT.replace(hour=10)
    rotations.record_old_id_check(db, connector.id, current, False, later)
    connector = _fresh(db, connector)
    assert connector.rotation_state is RotationState.COMPLETE
    assert (connector.old_external_id_works, connector.old_external_id_checked_at) == (False, later)
    assert rotations.old_id_to_check(connector) is None
    # Complete: another rotation may start, and it forgets the previous one's old ID.
    rotations.start_rotation(db, connector)
    connector = _fresh(db, connector)
    assert connector.rotation_state is RotationState.PENDING
    assert (connector.old_external_id, connector.old_external_id_works) == (None, None)


def test_the_view_is_json_with_the_cards_sentence(db: Session, org: Organization) -> None:
    connector = make_connector(db, org)
    current = connector.external_id
    assert rotations.rotation_view(connector) == {
        "state": "none",
        "externalId": current,
        "newExternalId": None,
        "oldExternalId": None,
        "oldIdStillWorks": None,
        "oldIdCheckedAt": None,
        "message": "Exports use this External ID.",
    }
    rotations.start_rotation(db, connector)
    pending = rotations.rotation_view(connector)
    assert pending["state"] == "pending" and pending["newExternalId"] == connector.new_external_id
    assert "update the stack in AWS account 210987654321 with it, then click Save" in pending["message"]

    rotations.activate_checked(connector, PASSED)
    db.commit()
    rotations.record_old_id_check(db, connector.id, current, True, CHECKED_AT)
    view = rotations.rotation_view(_fresh(db, connector))
    assert json.loads(json.dumps(view)) == view
    assert (view["oldExternalId"], view["oldIdStillWorks"]) == (current, True)
    assert view["oldIdCheckedAt"] == "2026-12-01T09:30:00+00:00"
    assert "the role still trusts the old one (checked at 2026-12-01 09:30 UTC)" in view["message"]


def test_every_external_id_is_unique_across_connectors_and_columns(
    db: Session, org: Organization, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = make_connector(db, org)
    second = make_connector(db, make_org(db, "globex"), bucket="globex-lineage")
    # The minting skips an ID that any column of any connector holds.
    fresh = new_external_id()
    minted = iter([first.external_id, fresh])
    monkeypatch.setattr(rotations, "new_external_id", lambda: next(minted))
    rotations.start_rotation(db, second)
    db.commit()
    assert second.new_external_id == fresh

    # And the database refuses a duplicate in the new and old columns, as in external_id.
    third = make_connector(db, org, bucket="third-lineage")
    with pytest.raises(IntegrityError):
        db.execute(
            update(Connector)
            .where(Connector.id == third.id)
            .values(rotation_state=RotationState.PENDING, new_external_id=fresh)
        )
    db.rollback()


def test_the_database_refuses_ids_that_do_not_fit_the_state(db: Session, org: Organization) -> None:
    connector = make_connector(db, org)
    with pytest.raises(IntegrityError, match="ck_connectors_rotation_ids"):
        db.execute(
            update(Connector).where(Connector.id == connector.id).values(rotation_state=RotationState.PENDING)
        )
    db.rollback()
    with pytest.raises(IntegrityError, match="ck_connectors_rotation_ids"):
        db.execute(
            update(Connector)
            .where(Connector.id == connector.id)
            .values(rotation_state=RotationState.VERIFIED, new_external_id=new_external_id())
        )
    db.rollback()
