"""Forms of the API keys page."""

from __future__ import annotations

from flask import has_request_context, request
from flask_wtf import FlaskForm
from wtforms import SelectMultipleField, StringField, SubmitField, ValidationError
from wtforms.fields.choices import SelectChoice
from wtforms.validators import DataRequired, Length
from wtforms.widgets import CheckboxInput, ListWidget

from lineage_core.accounts.api_keys import DEFAULT_SCOPES, NAME_MAX, Scope

SCOPES_OFFERED = "scopes_offered"

# What each scope lets a key do, as the page explains it.
SCOPE_CHOICES = [
    SelectChoice(Scope.LINEAGE_WRITE.value, "lineage:write: send OpenLineage events (Airflow, dbt, Spark)"),
    SelectChoice(
        Scope.CONNECTIONS_READ.value, "connections:read: read export connections, their runs and downloads"
    ),
    SelectChoice(
        Scope.CONNECTIONS_WRITE.value,
        "connections:write: create, change, activate, pause and delete export connections (reads too)",
    ),
]


class CreateApiKeyForm(FlaskForm):
    name = StringField(
        "Name",
        validators=[
            DataRequired(message="Give the key a name, such as the producer that will use it."),
            Length(max=NAME_MAX, message=f"At most {NAME_MAX} characters."),
        ],
    )
    # Checkboxes; an unknown posted value is refused by SelectMultipleField's own choice check.
    scopes = SelectMultipleField(
        "Scopes",
        choices=SCOPE_CHOICES,
        default=sorted(str(scope) for scope in DEFAULT_SCOPES),
        widget=ListWidget(prefix_label=False),
        option_widget=CheckboxInput(),
    )
    submit = SubmitField("Create key")

    def validate_scopes(self, field: SelectMultipleField) -> None:
        # The page sends SCOPES_OFFERED with the checkboxes. A browser sends no unchecked box, so without
        # it a form whose boxes were all cleared could not be told from a post made before keys had
        # scopes (which gets the default).
        if not field.data and has_request_context() and SCOPES_OFFERED in request.form:
            raise ValidationError("Choose at least one scope: what the key may do.")

    def chosen_scopes(self) -> list[str]:
        """The scopes ticked; lineage:write, as every key had before scopes, when none were sent."""
        return list(self.scopes.data or sorted(str(scope) for scope in DEFAULT_SCOPES))


class RevokeApiKeyForm(FlaskForm):
    """The Revoke button: CSRF token only."""

    submit = SubmitField("Revoke")
