"""At each export during an External ID rotation: does the customer's role still accept the old ID?

After Save verified a new External ID, exports use it, and the admin is asked to update the stack once
more so that the role trusts only the new one. Whether that happened is only visible from our side:
AssumeRole with the old ID is refused once it has. Each export (:func:`check_old_external_id`, called by
:mod:`lineage_core.export.run`) tries it and records the answer on the connector; the first refusal
completes the rotation (:func:`lineage_core.setup.rotations.record_old_id_check`).

Only a refusal (``AccessDenied``) counts as "no longer works": a network error, throttling or any other
answer proves nothing, so nothing is recorded and the next export tries again. The check never fails
the export, and the credentials it obtains are dropped unused.

In the local demo the AWS endpoint (moto) lets any External ID assume any role, so there the old ID
"works" only if the local IAM's trust policy still lists it (:mod:`lineage_core.demo.local_trust`, the
same stand-in for STS as Save's), which makes the rotation's end observable without real AWS.
"""

from __future__ import annotations

import logging

from botocore.exceptions import BotoCoreError, ClientError
from sqlalchemy.exc import SQLAlchemyError

from lineage_core.infra import aws
from lineage_core.infra.aws_errors import error_code
from lineage_core.infra.config import Settings
from lineage_core.infra.db import session_factory
from lineage_core.infra.models import Connector, utcnow
from lineage_core.ops.audit import Action, Actor, record
from lineage_core.setup import rotations
from lineage_core.setup.destination import Destination

logger = logging.getLogger(__name__)

# Who the audit trail names when an export finds the old External ID refused.
_ACTOR = Actor("export (old External ID check)")


def check_old_external_id(
    settings: Settings, connector_id: int, clients: aws.AwsClients | None = None
) -> None:
    """Try AssumeRole with the connector's old External ID, if a verified rotation has one; record it.

    Never raises: the export goes on whatever happens here.
    """
    try:
        factory = session_factory(settings.database_url)
        with factory() as session:
            connector = session.get(Connector, connector_id)
            old_id = rotations.old_id_to_check(connector) if connector is not None else None
            if connector is None or old_id is None or connector.role_arn is None:
                return
            destination = Destination(
                bucket=connector.bucket or "",
                prefix=connector.prefix,
                account_id=connector.account_id or "",
                role_arn=connector.role_arn,
                external_id=old_id,
            )
            session.rollback()  # no transaction held open across the AWS call
            works = old_id_works(settings, destination, clients)
            if works is None:
                return
            updated = rotations.record_old_id_check(session, connector_id, old_id, works, utcnow())
            if updated is not None and not works:
                record(
                    session,
                    Action.ROTATION_COMPLETED,
                    _ACTOR,
                    organization_id=updated.organization_id,
                    target_type="connector",
                    target_id=connector_id,
                )
            session.commit()
    except SQLAlchemyError as error:
        # Described by type only: a database error's text can carry SQL parameters (the IDs).
        logger.warning(
            "connector %s: the old External ID check was not recorded (%s)",
            connector_id,
            type(error).__name__,
        )


def old_id_works(settings: Settings, destination: Destination, clients: aws.AwsClients | None) -> bool | None:
    """Whether the role accepts ``destination.external_id``: True, False (refused), or None (unknown)."""
    if settings.local_mode:
        from lineage_core.demo.local_trust import trust_problem  # demo code, loaded only in the demo

        if trust_problem(settings, destination) is not None:
            return False
    clients = clients or aws.LiveAwsClients(settings, aws.BACKGROUND_CONFIG)
    try:
        aws.assume_role(settings, destination.role_arn, destination.external_id, sts=clients.sts())
    except ClientError as error:
        if error_code(error) == "AccessDenied":
            return False
        logger.warning("the old External ID check got no answer from STS (%s)", error_code(error))
        return None
    except BotoCoreError as error:
        logger.warning("the old External ID check got no answer from STS (%s)", type(error).__name__)
        return None
    return True
