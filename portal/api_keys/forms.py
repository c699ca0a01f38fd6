"""Forms of the API keys page."""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import StringField, SubmitField
from wtforms.validators import DataRequired, Length

from lineage_core.accounts.api_keys import NAME_MAX


class CreateApiKeyForm(FlaskForm):
    name = StringField(
        "Name",
        validators=[
            DataRequired(message="Give the key a name, such as the producer that will use it."),
            Length(max=NAME_MAX, message=f"At most {NAME_MAX} characters."),
        ],
    )
    submit = SubmitField("Create key")


class RevokeApiKeyForm(FlaskForm):
    """The Revoke button: CSRF token only."""

    submit = SubmitField("Revoke")
