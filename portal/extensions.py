"""Flask extensions, created unbound and attached in :func:`portal.create_app`."""

from flask_login import LoginManager
from flask_wtf import CSRFProtect

csrf = CSRFProtect()
login_manager = LoginManager()
login_manager.login_view = "auth.login"
login_manager.login_message = "Sign in to continue."
login_manager.session_protection = "strong"
