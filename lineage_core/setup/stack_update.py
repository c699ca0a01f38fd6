"""Updating an existing CloudFormation stack to a connection's current values: the values and the CLI command.

When an admin updates a stack with "Replace current template", the CloudFormation console fills the
Parameters page with the stack's *current* value of each parameter that already exists, not with the
new template's defaults (the defaults only fill parameters the stack does not have yet). An admin who
clicks through keeps the old values: an edit would not apply, and an External ID rotation would never
finish. So the update instructions state every value explicitly: as a table to check the Parameters
page against, and as an ``aws cloudformation update-stack`` command that passes each one.

The values are :func:`lineage_core.setup.cloudformation.parameter_values`, the same the template download
carries as defaults; this module holds no parameter list of its own.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from lineage_core.setup.cloudformation import load_template, parameter_values
from lineage_core.setup.role_spec import RoleSpec

# The admin chose the stack's name in AWS; Foundational never learns it. The command shows this in its
# place, for the admin to replace.
STACK_NAME_PLACEHOLDER = "YOUR_STACK_NAME"

# A value made only of these reads the same unquoted in the CLI's shorthand syntax
# (ParameterKey=K,ParameterValue=V). Anything else, a ',' (it would start the next key) or a leading
# quote (it would open a quoted string) above all, is put in double quotes inside the shorthand.
_SHORTHAND_PLAIN = re.compile(r"\A[A-Za-z0-9_.:/@+=-]*\Z", re.ASCII)


@dataclass(frozen=True)
class StackParameter:
    name: str  # the template's parameter name, as the CLI command names it
    label: str  # what the console's Parameters page calls it (the template's ParameterLabels)
    value: str  # "" when the field must be empty


@dataclass(frozen=True)
class StackUpdate:
    """What the admin needs to update a stack: each parameter (template order) and the command."""

    parameters: list[StackParameter]
    command: str
    template_file: str  # the download's file name, which the command reads
    stack_name: str  # the placeholder in the command, for the admin to replace


def _shorthand_value(value: str) -> str:
    if _SHORTHAND_PLAIN.match(value):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def update_stack_command(
    values: Mapping[str, str], template_file: str, stack_name: str = STACK_NAME_PLACEHOLDER
) -> str:
    """The ``aws cloudformation update-stack`` command that sets every parameter to ``values``.

    Each parameter is given explicitly, an empty one as ``ParameterValue=`` (never left out, and never
    ``UsePreviousValue``): the command then sets exactly the values the page shows, whatever defaults the
    file in the folder has, and the admin can read in it what the stack will hold. Every argument is
    quoted for a POSIX shell with :func:`shlex.quote`. The command is split over lines with ``\\``
    continuations, one parameter a line.

    Args:
        values: parameter name → value, in the order the command lists them.
        template_file: the downloaded template's file name (``file://`` relative to the current folder).
        stack_name: the stack's name, or the placeholder the admin replaces.

    Raises:
        ValueError: ``values`` is empty (an update command without parameters would keep the old ones).
    """
    if not values:
        raise ValueError("an update-stack command needs the template's parameter values")
    head = [
        "aws cloudformation update-stack",
        f"--stack-name {shlex.quote(stack_name)}",
        f"--template-body {shlex.quote('file://' + template_file)}",
        "--capabilities CAPABILITY_NAMED_IAM",
        "--parameters",
    ]
    parameters = [
        shlex.quote(f"ParameterKey={name},ParameterValue={_shorthand_value(value)}")
        for name, value in values.items()
    ]
    return " \\\n  ".join(head + parameters)


def stack_update(spec: RoleSpec, template_file: str) -> StackUpdate:
    """The parameter values of ``spec``'s template and the command that updates a stack to them."""
    values = parameter_values(spec)
    labels = load_template()["Metadata"]["AWS::CloudFormation::Interface"]["ParameterLabels"]
    return StackUpdate(
        parameters=[StackParameter(name, labels[name]["default"], value) for name, value in values.items()],
        command=update_stack_command(values, template_file),
        template_file=template_file,
        stack_name=STACK_NAME_PLACEHOLDER,
    )
