"""The update-stack instructions: every parameter with the connection's value, and the CLI command.

The command's shorthand (``ParameterKey=K,ParameterValue=V``) is read back here the way the shell and
the AWS CLI read it: :func:`shlex.split` for the shell; for the CLI, bash runs the command with the
real ``aws`` (when the machine has one) against a local endpoint that records the UpdateStack request.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import parse_qsl

import pytest

from lineage_core.setup import cloudformation
from lineage_core.setup.role_spec import RoleSpec
from lineage_core.setup.stack_update import STACK_NAME_PLACEHOLDER, stack_update, update_stack_command
from tests.services import VENDOR_ACCOUNT_ID

SPEC = RoleSpec(
    vendor_account_id=VENDOR_ACCOUNT_ID,
    external_id="ext-current-0123456789",
    role_name="FoundationalOpenLineageExport",
    role_path="/",
    bucket="acme-lineage",
    prefix="foundational/openlineage",
    customer_account_id="123456789012",  # moto's account: the template's Rule compares the two
)
TEMPLATE_FILE = "openlineage-export-FoundationalOpenLineageExport.yaml"


def _words(command: str) -> list[str]:
    """The command's words as a POSIX shell passes them (shlex does not join ``\\``-newline lines)."""
    return shlex.split(command.replace("\\\n", ""))


def _parameter_tokens(command: str) -> list[str]:
    """The words after ``--parameters``."""
    words = _words(command)
    return words[words.index("--parameters") + 1 :]


def test_the_command_sets_every_template_parameter_in_the_templates_order() -> None:
    command = update_stack_command(cloudformation.parameter_values(SPEC), TEMPLATE_FILE)
    words = _words(command)
    assert words[:3] == ["aws", "cloudformation", "update-stack"]
    assert words[words.index("--stack-name") + 1] == STACK_NAME_PLACEHOLDER
    assert words[words.index("--template-body") + 1] == f"file://{TEMPLATE_FILE}"
    assert words[words.index("--capabilities") + 1] == "CAPABILITY_NAMED_IAM"
    names = [token.split(",", 1)[0].removeprefix("ParameterKey=") for token in _parameter_tokens(command)]
    assert names == list(cloudformation.load_template()["Parameters"])
    assert "ParameterKey=BucketName,ParameterValue=acme-lineage" in _parameter_tokens(command)
    assert "ParameterKey=ExternalId,ParameterValue=ext-current-0123456789" in _parameter_tokens(command)


def test_an_empty_value_is_given_as_an_explicit_empty_value() -> None:
    tokens = _parameter_tokens(update_stack_command(cloudformation.parameter_values(SPEC), TEMPLATE_FILE))
    # Left out, or UsePreviousValue, the stack could keep a NewExternalId from a rotation.
    for name in ("NewExternalId", "KmsKeyArn", "PermissionsBoundaryArn"):
        assert f"ParameterKey={name},ParameterValue=" in tokens
    assert not any("UsePreviousValue" in token for token in tokens)


def test_a_pending_rotation_passes_both_external_ids() -> None:
    update = stack_update(replace(SPEC, new_external_id="ext-new-9876543210"), TEMPLATE_FILE)
    values = {parameter.name: parameter.value for parameter in update.parameters}
    assert (values["ExternalId"], values["NewExternalId"]) == ("ext-current-0123456789", "ext-new-9876543210")
    assert "ParameterKey=NewExternalId,ParameterValue=ext-new-9876543210" in _parameter_tokens(update.command)


def test_values_are_quoted_for_the_shell_and_for_the_clis_shorthand() -> None:
    # Both fit the template's patterns: a prefix may hold ' ( ) ! and a role name , and =.
    values = {"Prefix": "it's(the)!export", "RoleName": "role,with=comma", "RolePath": "/"}
    command = update_stack_command(values, "my template.yaml", stack_name="stack; rm -rf ~")
    words = _words(command)
    assert words[words.index("--stack-name") + 1] == "stack; rm -rf ~"
    assert words[words.index("--template-body") + 1] == "file://my template.yaml"
    # A ',' would start the shorthand's next key and a leading quote would open a string: in "…".
    assert _parameter_tokens(command) == [
        'ParameterKey=Prefix,ParameterValue="it\'s(the)!export"',
        'ParameterKey=RoleName,ParameterValue="role,with=comma"',
        "ParameterKey=RolePath,ParameterValue=/",
    ]


def test_the_labels_are_the_consoles_and_the_values_the_templates_defaults() -> None:
    update = stack_update(SPEC, TEMPLATE_FILE)
    labels = {parameter.name: parameter.label for parameter in update.parameters}
    assert labels["ExternalId"] == "External ID (do not change)"
    assert labels["NewExternalId"] == "New External ID, while it is being rotated in (do not change)"
    rendered = cloudformation.parameter_values(SPEC)
    assert [(p.name, p.value) for p in update.parameters] == list(rendered.items())
    assert (update.template_file, update.stack_name) == (TEMPLATE_FILE, STACK_NAME_PLACEHOLDER)


def test_no_values_is_refused() -> None:
    with pytest.raises(ValueError, match="needs the template's parameter values"):
        update_stack_command({}, TEMPLATE_FILE)


class _RecordingCloudFormation(BaseHTTPRequestHandler):
    """Answers every request as a successful UpdateStack and keeps the request's form fields.

    Not moto: moto 5.2 fails to update this template's AWS::IAM::Policy resources (AttributeError in
    its update_from_cloudformation_json). What is tested is the request the CLI makes of the command.
    """

    requests: ClassVar[list[dict[str, str]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        self.requests.append(dict(parse_qsl(body, keep_blank_values=True)))
        answer = (
            b'<UpdateStackResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/">'
            b"<UpdateStackResult><StackId>arn:aws:cloudformation:us-east-1:123456789012:stack/s/1</StackId>"
            b"</UpdateStackResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata>"
            b"</UpdateStackResponse>"
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads the recorded requests, not a log."""


@pytest.mark.skipif(shutil.which("aws") is None, reason="no AWS CLI on this machine")
def test_the_aws_cli_sends_every_value_of_the_command(tmp_path: Path) -> None:
    """After Save verified a rotation and the prefix was edited: the command, run by the real AWS CLI,
    asks CloudFormation for ExternalId the new ID, NewExternalId empty and the new prefix."""
    verified = replace(SPEC, external_id="ext-new-9876543210", prefix="it's(the)!export")
    (tmp_path / TEMPLATE_FILE).write_text(cloudformation.render_template(verified), encoding="utf-8")
    command = stack_update(verified, TEMPLATE_FILE).command.replace(
        STACK_NAME_PLACEHOLDER, "FoundationalOpenLineageExport"
    )
    _RecordingCloudFormation.requests.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RecordingCloudFormation)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    try:
        finished = subprocess.run(
            ["bash", "-c", f"{command} \\\n  --endpoint-url http://127.0.0.1:{server.server_port}"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert finished.returncode == 0, finished.stderr
    [request] = _RecordingCloudFormation.requests
    assert (request["Action"], request["StackName"]) == ("UpdateStack", "FoundationalOpenLineageExport")
    assert request["TemplateBody"] == cloudformation.render_template(verified)
    assert request["Capabilities.member.1"] == "CAPABILITY_NAMED_IAM"
    count = len(cloudformation.parameter_values(verified))
    sent = {
        request[f"Parameters.member.{n}.ParameterKey"]: request.get(f"Parameters.member.{n}.ParameterValue")
        for n in range(1, count + 1)
    }
    assert sent == cloudformation.parameter_values(verified)
    assert sent["NewExternalId"] == "" and sent["ExternalId"] == "ext-new-9876543210"
