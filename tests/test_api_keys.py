"""API keys: created and shown once, stored hashed, listed by prefix, revoked; the portal pages."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from alembic import command
from flask.testing import FlaskClient
from sqlalchemy import create_engine, select, text
from sqlalchemy.orm import Session

from lineage_core.accounts.api_keys import (
    ApiKeyError,
    AuthenticationError,
    AuthFailure,
    Scope,
    ScopeError,
    authenticate,
    create_api_key,
    hash_key,
    list_api_keys,
    parse_bearer,
    record_use,
    require_scope,
    revoke_api_key,
)
from lineage_core.infra import migrate
from lineage_core.infra.models import ApiKey, AuditEvent, Organization, User
from tests.factories import make_org
from tests.web import login, post_form

KEY_SHAPE = re.compile(r"^olk_[0-9a-f]{8}_[A-Za-z0-9_-]{43}$")


def test_a_new_key_is_returned_once_and_only_its_hash_is_stored(db: Session, org: Organization) -> None:
    new_key = create_api_key(db, org.id, "  airflow-prod ")
    db.commit()
    assert KEY_SHAPE.match(new_key.secret)
    assert new_key.prefix == new_key.secret[:12]
    row = db.scalars(select(ApiKey)).one()
    assert (row.name, row.prefix, row.organization_id) == ("airflow-prod", new_key.prefix, org.id)
    assert row.key_hash == hash_key(new_key.secret)
    stored = " ".join(str(v) for v in (row.name, row.prefix, row.key_hash))
    assert new_key.secret[12:] not in stored
    assert create_api_key(db, org.id, "second").secret != new_key.secret


@pytest.mark.parametrize("name", ["", "   ", "x" * 201])
def test_a_key_needs_a_reasonable_name(db: Session, org: Organization, name: str) -> None:
    with pytest.raises(ApiKeyError, match="name of 1 to 200 characters"):
        create_api_key(db, org.id, name)


def test_authenticate_finds_the_organization_and_refuses_bad_keys(db: Session, org: Organization) -> None:
    new_key = create_api_key(db, org.id, "dbt")
    db.commit()
    caller = authenticate(db, new_key.secret)
    assert (caller.organization_id, caller.api_key_id) == (org.id, new_key.id)

    tampered = new_key.secret[:-1] + ("A" if new_key.secret[-1] != "A" else "B")
    for key in (tampered, "olk_not-a-key", new_key.secret + "x", ""):
        with pytest.raises(AuthenticationError) as caught:
            authenticate(db, key)
        assert caught.value.reason is AuthFailure.INVALID

    revoke_api_key(db, org.id, new_key.id)
    db.commit()
    with pytest.raises(AuthenticationError, match="was revoked") as caught:
        authenticate(db, new_key.secret)
    assert caught.value.reason is AuthFailure.REVOKED


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (None, AuthFailure.MISSING),
        ("", AuthFailure.MISSING),
        ("Basic abc", AuthFailure.INVALID),
        ("Bearer", AuthFailure.INVALID),
    ],
)
def test_bearer_header_parsing(header: str | None, reason: AuthFailure) -> None:
    with pytest.raises(AuthenticationError) as caught:
        parse_bearer(header)
    assert caught.value.reason is reason


def test_bearer_scheme_is_case_insensitive() -> None:
    assert parse_bearer("bearer  olk_x ") == "olk_x"


def test_revoking_is_scoped_to_the_organization(db: Session, org: Organization) -> None:
    other = make_org(db, "globex")
    theirs = create_api_key(db, other.id, "theirs")
    db.commit()
    assert revoke_api_key(db, org.id, theirs.id) is None
    db.commit()
    assert authenticate(db, theirs.secret).organization_id == other.id


def test_list_shows_active_keys_first(db: Session, org: Organization) -> None:
    first = create_api_key(db, org.id, "first")
    second = create_api_key(db, org.id, "second")
    revoke_api_key(db, org.id, second.id)
    third = create_api_key(db, org.id, "third")
    db.commit()
    assert [k.name for k in list_api_keys(db, org.id)] == ["third", "first", "second"]
    assert {k.id for k in list_api_keys(db, org.id)} == {first.id, second.id, third.id}


def test_last_use_is_recorded_at_most_once_a_minute(db: Session, org: Organization) -> None:
    new_key = create_api_key(db, org.id, "spark")
    db.commit()
    caller = authenticate(db, new_key.secret)
    assert record_use(db, caller)
    db.commit()
    used = db.scalar(select(ApiKey.last_used_at))
    assert used is not None
    again = authenticate(db, new_key.secret)
    assert not record_use(db, again, now=used + timedelta(seconds=30))
    assert record_use(db, again, now=used + timedelta(seconds=61))


# -- pages ---------------------------------------------------------------------------------------------------


def test_an_admin_creates_a_key_and_sees_it_once(
    admin_client: FlaskClient, db: Session, org: Organization
) -> None:
    response = post_form(admin_client, "/api-keys/", None, {"name": "airflow-prod"})
    assert response.status_code == 201
    assert response.headers["Cache-Control"] == "no-store"
    page = response.get_data(as_text=True)
    secret = re.search(r'id="new-api-key">([^<]+)<', page)
    assert secret and KEY_SHAPE.match(secret.group(1))
    assert "http://localhost/api/v1/lineage" in page
    assert authenticate(db, secret.group(1)).organization_id == org.id

    listing = admin_client.get("/api-keys/").get_data(as_text=True)
    assert "airflow-prod" in listing
    assert secret.group(1)[:12] in listing
    assert secret.group(1) not in listing


def test_an_empty_name_is_refused_on_the_page(admin_client: FlaskClient, db: Session) -> None:
    response = post_form(admin_client, "/api-keys/", None, {"name": ""})
    assert response.status_code == 422
    assert "Give the key a name" in response.get_data(as_text=True)
    assert db.scalars(select(ApiKey)).all() == []


def test_an_admin_revokes_a_key(admin_client: FlaskClient, db: Session, org: Organization) -> None:
    new_key = create_api_key(db, org.id, "old")
    db.commit()
    response = post_form(admin_client, "/api-keys/", f"/api-keys/{new_key.id}/revoke", {})
    assert response.status_code == 302
    page = admin_client.get("/api-keys/").get_data(as_text=True)
    assert "is revoked" in page and "Revoked" in page
    with pytest.raises(AuthenticationError):
        authenticate(db, new_key.secret)


def test_another_organizations_key_cannot_be_revoked_from_the_page(
    admin_client: FlaskClient, db: Session
) -> None:
    other = make_org(db, "globex")
    theirs = create_api_key(db, other.id, "theirs")
    db.commit()
    response = post_form(admin_client, "/api-keys/", f"/api-keys/{theirs.id}/revoke", {})
    assert response.status_code == 404
    assert authenticate(db, theirs.secret).organization_id == other.id


def test_revoke_without_csrf_token_is_refused(
    admin_client: FlaskClient, db: Session, org: Organization
) -> None:
    new_key = create_api_key(db, org.id, "k")
    db.commit()
    assert admin_client.post(f"/api-keys/{new_key.id}/revoke").status_code == 400
    assert authenticate(db, new_key.secret)


def test_the_pages_need_a_signed_in_org_admin(client: FlaskClient, operator: User) -> None:
    response = client.get("/api-keys/")
    assert response.status_code == 302 and "/login" in response.headers["Location"]
    login(client, operator.email)
    assert client.get("/api-keys/").status_code == 403


def test_the_nav_links_to_api_keys_for_admins(admin_client: FlaskClient) -> None:
    page = admin_client.get("/api-keys/").get_data(as_text=True)
    assert '<a href="/api-keys/">API keys</a>' in page


# -- scopes --------------------------------------------------------------------------------------------------


def test_a_key_has_lineage_write_by_default_and_authenticate_returns_its_scopes(
    db: Session, org: Organization
) -> None:
    plain = create_api_key(db, org.id, "airflow")
    scoped = create_api_key(db, org.id, "terraform", [Scope.CONNECTIONS_WRITE, "connections:read"])
    db.commit()
    assert plain.scopes == authenticate(db, plain.secret).scopes == {Scope.LINEAGE_WRITE}
    caller = authenticate(db, scoped.secret)
    assert caller.scopes == {Scope.CONNECTIONS_READ, Scope.CONNECTIONS_WRITE}
    assert caller.prefix == scoped.prefix
    assert (
        db.scalar(select(ApiKey.scopes).where(ApiKey.id == scoped.id)) == "connections:read connections:write"
    )


def test_require_scope_refuses_what_the_key_was_not_given(db: Session, org: Organization) -> None:
    writer = authenticate(db, create_api_key(db, org.id, "tf", [Scope.CONNECTIONS_WRITE]).secret)
    require_scope(writer, Scope.CONNECTIONS_WRITE)
    require_scope(writer, Scope.CONNECTIONS_READ)  # write implies read
    with pytest.raises(ScopeError) as refused:
        require_scope(writer, Scope.LINEAGE_WRITE)
    assert refused.value.scope is Scope.LINEAGE_WRITE
    assert str(refused.value) == (
        "This API key may not lineage:write; an org admin can create a key with that scope."
    )
    reader = authenticate(db, create_api_key(db, org.id, "ro", [Scope.CONNECTIONS_READ]).secret)
    with pytest.raises(ScopeError, match="may not connections:write"):
        require_scope(reader, Scope.CONNECTIONS_WRITE)


@pytest.mark.parametrize("scopes", [[], ["admin"], ["lineage:write", "connections:*"]])
def test_unknown_or_no_scopes_are_refused(db: Session, org: Organization, scopes: list[str]) -> None:
    with pytest.raises(ApiKeyError) as refused:
        create_api_key(db, org.id, "k", scopes)
    assert refused.value.field == "scopes"
    db.rollback()
    assert db.scalars(select(ApiKey)).all() == []


def test_an_admin_chooses_the_scopes_on_the_page(admin_client: FlaskClient, db: Session) -> None:
    page = admin_client.get("/api-keys/").get_data(as_text=True)
    assert '<input checked id="scopes-0" name="scopes" type="checkbox" value="lineage:write">' in page
    assert 'value="connections:write"' in page
    response = post_form(
        admin_client, "/api-keys/", None, {"name": "terraform", "scopes": ["connections:write"]}
    )
    assert response.status_code == 201
    created = response.get_data(as_text=True)
    assert 'id="new-api-key-scopes">connections:write<' in created
    assert "http://localhost/api/v1/connections" in created
    assert "curl -X POST http://localhost/api/v1/lineage" not in created  # it cannot ingest
    secret = re.search(r'id="new-api-key">([^<]+)<', created)
    assert secret and authenticate(db, secret.group(1)).scopes == {Scope.CONNECTIONS_WRITE}
    listing = admin_client.get("/api-keys/").get_data(as_text=True)
    assert '<td class="mono key-scopes">connections:write</td>' in listing
    entry = db.scalars(select(AuditEvent).where(AuditEvent.action == "api_key.created")).one()
    assert '"scopes":["connections:write"]' in (entry.details or "")


def test_clearing_every_scope_on_the_page_is_refused(admin_client: FlaskClient, db: Session) -> None:
    response = post_form(admin_client, "/api-keys/", None, {"name": "none", "scopes_offered": "1"})
    assert response.status_code == 422
    assert "Choose at least one scope" in response.get_data(as_text=True)
    response = post_form(admin_client, "/api-keys/", None, {"name": "x", "scopes": ["root"]})
    assert response.status_code == 422
    assert db.scalars(select(ApiKey)).all() == []


def test_existing_keys_migrate_to_lineage_write_and_back(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/keys.db"
    migrate.upgrade(url, "0007")
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            text("INSERT INTO organizations (id, slug, name, created_at) VALUES (1, 'a', 'A', :at)"),
            {"at": "2026-01-01"},
        )
        for key_id in (1, 2):
            connection.execute(
                text(
                    "INSERT INTO api_keys (id, organization_id, name, prefix, key_hash, created_at) "
                    "VALUES (:id, 1, 'old', :prefix, :hash, '2026-01-01')"
                ),
                {"id": key_id, "prefix": f"olk_0000000{key_id}", "hash": f"h{key_id}"},
            )
    migrate.upgrade(url, "0008")
    with engine.begin() as connection:
        assert connection.execute(text("SELECT scopes FROM api_keys ORDER BY id")).scalars().all() == [
            "lineage:write",
            "lineage:write",
        ]
        connection.execute(text("UPDATE api_keys SET scopes = 'connections:read' WHERE id = 2"))
    # Down again, a key that could not ingest must not become an ingest key: it is revoked.
    command.downgrade(migrate.alembic_config(url), "0007")
    with engine.begin() as connection:
        revoked = connection.execute(
            text("SELECT id, revoked_at IS NOT NULL FROM api_keys ORDER BY id")
        ).all()
    assert [tuple(row) for row in revoked] == [(1, False), (2, True)]
    engine.dispose()
