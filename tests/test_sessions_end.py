"""A session ends for every copy of its cookie (finding 2 of the abuse review): signing out, a new
password and disabling the user each make an earlier ``session`` cookie sign in no one."""

from __future__ import annotations

from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from lineage_core.accounts.users import change_password, set_disabled
from lineage_core.infra.models import User
from portal.cli.accounts import user_cli
from tests.web import PASSWORD, csrf_token_from, login


def _copy_of_session(app: Flask, client: FlaskClient) -> FlaskClient:
    """Another browser holding a copy of ``client``'s session cookie, taken now."""
    cookie = client.get_cookie("session")
    assert cookie is not None
    thief = app.test_client()
    thief.set_cookie("session", cookie.value)
    assert thief.get("/integrations/").status_code == 200
    return thief


def _signed_out(client: FlaskClient) -> bool:
    response = client.get("/integrations/")
    return response.status_code == 302 and response.headers["Location"].startswith("/login")


def test_a_cookie_copied_before_logout_no_longer_works_after_it(
    app: Flask, admin_client: FlaskClient
) -> None:
    thief = _copy_of_session(app, admin_client)
    page = admin_client.get("/integrations/").get_data(as_text=True)
    assert admin_client.post("/logout", data={"csrf_token": csrf_token_from(page)}).status_code == 302
    assert _signed_out(admin_client)
    assert _signed_out(thief)


def test_signing_in_again_after_logout_works(app: Flask, client: FlaskClient, admin: User) -> None:
    login(client, admin.email)
    page = client.get("/integrations/").get_data(as_text=True)
    client.post("/logout", data={"csrf_token": csrf_token_from(page)})
    login(client, admin.email)
    assert client.get("/integrations/").status_code == 200


def test_a_new_password_ends_every_session(
    app: Flask, admin_client: FlaskClient, db: Session, admin: User
) -> None:
    thief = _copy_of_session(app, admin_client)
    change_password(db, admin, "a quite different passphrase")
    db.commit()
    assert _signed_out(admin_client) and _signed_out(thief)


def test_disabling_a_user_ends_their_sessions_and_refuses_sign_in(
    app: Flask, admin_client: FlaskClient, db: Session, admin: User
) -> None:
    thief = _copy_of_session(app, admin_client)
    result = app.test_cli_runner().invoke(user_cli, ["disable", admin.email])
    assert result.exit_code == 0, result.output
    assert _signed_out(admin_client) and _signed_out(thief)
    fresh = app.test_client()
    page = fresh.get("/login").get_data(as_text=True)
    response = fresh.post(
        "/login", data={"email": admin.email, "password": PASSWORD, "csrf_token": csrf_token_from(page)}
    )
    assert response.status_code == 200 and "not correct" in response.get_data(as_text=True)
    db.expire_all()
    set_disabled(db, db.get(User, admin.id), False)  # type: ignore[arg-type]
    db.commit()
    login(fresh, admin.email)


def test_the_cli_sets_a_new_password_through_the_policy(app: Flask, admin: User) -> None:
    runner = app.test_cli_runner()
    weak = runner.invoke(user_cli, ["password", admin.email, "--password", "Password1234"])
    assert weak.exit_code != 0 and "most common" in weak.output
    strong = runner.invoke(user_cli, ["password", admin.email, "--password", "violet kettle under moss"])
    assert strong.exit_code == 0, strong.output
