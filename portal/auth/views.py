"""Sign in and sign out."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask_login import current_user, login_user, logout_user
from werkzeug.wrappers.response import Response

from lineage_core.accounts.users import authenticate
from portal.auth.forms import LoginForm, LogoutForm
from portal.database import get_db
from portal.security import PortalUser

bp = Blueprint("auth", __name__)


@bp.route("/login", methods=["GET", "POST"])
def login() -> str | Response:
    form = LoginForm()
    if form.validate_on_submit():
        user = authenticate(get_db(), form.email.data or "", form.password.data or "")
        if user is not None:
            login_user(PortalUser(user))
            return redirect(_safe_next(request.args.get("next")))
        flash("The e-mail or password is not correct.", "error")
    return render_template("auth/login.html", form=form)


@bp.post("/logout")
def logout() -> Response:
    form = LogoutForm()
    if form.validate_on_submit():
        logout_user()
    return redirect(url_for("auth.login"))


def _safe_next(target: str | None) -> str:
    """Only a path on this site: an open redirect would make the login page a phishing aid."""
    if target:
        parts = urlsplit(target)
        if not parts.scheme and not parts.netloc and target.startswith("/") and not target.startswith("//"):
            return target
    # Each role's own start page: an operator sent to Integrations would land on a 403.
    return url_for("ops.index") if current_user.is_operator else url_for("integrations.index")
