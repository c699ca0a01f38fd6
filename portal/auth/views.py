"""Sign in and sign out."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, flash, make_response, redirect, render_template, request, url_for
from flask_login import current_user, login_user, logout_user
from werkzeug.wrappers.response import Response

from lineage_core.accounts.sessions import end_sessions
from lineage_core.accounts.users import authenticate, find_user
from lineage_core.ops.audit import Action, Actor
from portal import limits
from portal.audit import audit
from portal.auth.forms import LoginForm, LogoutForm
from portal.database import get_db
from portal.security import PortalUser

bp = Blueprint("auth", __name__)


@bp.route("/login", methods=["GET", "POST"])
@limits.login_limits
def login() -> str | Response | tuple[str, int]:
    form = LoginForm()
    if form.validate_on_submit():
        db = get_db()
        email = form.email.data or ""
        user = authenticate(db, email, form.password.data or "")
        if user is not None:
            login_user(PortalUser(user))
            audit(Action.SIGNED_IN, target_type="user", target_id=user.id)
            db.commit()
            response = redirect(_safe_next(request.args.get("next")))
            limits.set_device_cookie(response, user.email)
            return response
        limits.mark_login_failed()
        # Recorded under the account's organization when the e-mail is one of ours, so its admins see it.
        known = find_user(db, email)
        audit(
            Action.SIGN_IN_FAILED,
            actor=Actor(limits.typed_email() or "(empty)"),
            organization_id=known.organization_id if known else None,
            target_type="user" if known else None,
            target_id=known.id if known else None,
        )
        db.commit()
        flash("The e-mail or password is not correct.", "error")
        return render_template("auth/login.html", form=form), 200
    return render_template("auth/login.html", form=form)


@bp.post("/logout")
def logout() -> Response:
    form = LogoutForm()
    if form.validate_on_submit() and current_user.is_authenticated:
        db = get_db()
        # Every copy of this user's session cookie stops working, not only this browser's.
        end_sessions(db, current_user.user_id)
        audit(Action.SIGNED_OUT, target_type="user", target_id=current_user.user_id)
        db.commit()
        logout_user()
    return make_response(redirect(url_for("auth.login")))


def _safe_next(target: str | None) -> str:
    """Only a path on this site: an open redirect would make the login page a phishing aid."""
    if target:
        parts = urlsplit(target)
        if not parts.scheme and not parts.netloc and target.startswith("/") and not target.startswith("//"):
            return target
    # Each role's own start page: an operator sent to Integrations would land on a 403.
    return url_for("ops.index") if current_user.is_operator else url_for("integrations.index")
