"""The customer-role CloudFormation template: lint, parameter rules, rendering, what a stack creates.

Deployments go through the CloudFormation API of a real moto server over HTTP; the role is then read
back through IAM and compared, document for document, with ``expected_policies``. moto resolves
``AWS::Partition`` to ``aws`` whatever the Region and does not evaluate ``Rules``, so those two are
checked with a small evaluator of the intrinsics the template uses (below), which the deploy tests
first prove agrees with moto for the ``aws`` partition.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import boto3
import pytest
import yaml
from cfnlint.api import ManualArgs, lint

from lineage_core.setup import destination
from lineage_core.setup.cloudformation import (
    KMS_POLICY_NAME,
    S3_POLICY_NAME,
    TEMPLATE_PATH,
    TemplateValueError,
    download_name,
    expected_policies,
    load_template,
    parameter_values,
    render_template,
)
from lineage_core.setup.destination import FieldError
from lineage_core.setup.role_spec import RoleSpec
from tests.factories import build_connector
from tests.services import VENDOR_ACCOUNT_ID

# The customer's account is not the vendor's (moto's default) account, as in production: a template
# that trusted AWS::AccountId or CustomerAccountId instead of VendorAccountId would show up.
CUSTOMER_ACCOUNT_ID = "111122223333"
LINT_REGIONS = ["us-east-1", "eu-west-1", "cn-north-1", "us-gov-west-1"]
KMS_KEY_ARN = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
BOUNDARY_ARN = "arn:aws:iam::111122223333:policy/DeveloperBoundary"


def make_spec(**changes: Any) -> RoleSpec:
    values: dict[str, Any] = {
        "vendor_account_id": VENDOR_ACCOUNT_ID,
        "external_id": "olx-3q2PZk0Vt0sX8jv6kYb1rNQe7u5wH9cD",
        "role_name": "FoundationalOpenLineageExport",
        "role_path": "/",
        "bucket": "acme-lineage",
        "prefix": "foundational/openlineage",
        "customer_account_id": CUSTOMER_ACCOUNT_ID,
    }
    return RoleSpec(**{**values, **changes})


DEPLOY_CASES = {
    "empty-prefix": make_spec(prefix=""),
    "nested-prefix": make_spec(prefix="a/b/c"),
    "kms-key": make_spec(kms_key_arn=KMS_KEY_ARN),
    "role-path": make_spec(role_path="/integrations/"),
    "permissions-boundary": make_spec(permissions_boundary_arn=BOUNDARY_ARN),
    "all-options": make_spec(
        prefix="x", kms_key_arn=KMS_KEY_ARN, role_path="/a/b/", permissions_boundary_arn=BOUNDARY_ARN
    ),
    # Allowed characters that mean something to YAML (a leading '@', quotes, ': ', '=') must come
    # back as the same strings: the renderer dumps data, it does not paste text.
    "yaml-significant-characters": make_spec(
        role_name="@ol=x,y+z",
        prefix="'quoted'/(p)=+!/-dash",
        external_id="olx-a:b/c@d=e,f+g.h_i-j:/@=,.+",
        bucket="1.2-3",
    ),
}


def lint_findings(template_text: str) -> list[str]:
    """cfn-lint errors, warnings and informational findings, for every Region we may be deployed in."""
    matches = lint(template_text, config=ManualArgs(regions=LINT_REGIONS, include_checks=["I"]))
    return [str(match) for match in matches]


def customer_client(endpoint: str, service: str) -> Any:
    """A client acting in the customer's account: moto picks the account from ``x-moto-account-id``."""
    client = boto3.client(service, endpoint_url=endpoint, region_name="us-east-1")

    def add_account_header(request: Any, **_: Any) -> None:
        request.headers["x-moto-account-id"] = CUSTOMER_ACCOUNT_ID

    client.meta.events.register("before-sign", add_account_header)
    return client


def json_document(value: Any) -> dict[str, Any]:
    """An IAM policy document as boto returns it: already URL-decoded and parsed from JSON.

    A string means it was not JSON (moto returns a Python repr for policies it stored as objects):
    that is a failure, not something to parse around.
    """
    assert isinstance(value, dict), f"IAM returned a policy document that is not JSON: {value!r}"
    return value


# --- A small evaluator of the intrinsics the template uses -------------------------------------------

_NO_VALUE = object()


def evaluate(node: Any, values: dict[str, str], conditions: dict[str, bool]) -> Any:
    """``node`` with Ref, Fn::Sub (string form), Fn::If, Fn::Equals and Fn::Not resolved.

    ``values`` holds parameters and pseudo parameters; AWS::NoValue removes the key or list item.
    """
    if isinstance(node, list):
        items = [evaluate(item, values, conditions) for item in node]
        return [item for item in items if item is not _NO_VALUE]
    if not isinstance(node, dict):
        return node
    if len(node) == 1:
        (key, arg), *_ = node.items()
        if key == "Ref":
            return _NO_VALUE if arg == "AWS::NoValue" else values[arg]
        if key == "Fn::Sub":
            assert isinstance(arg, str), "only the string form of Fn::Sub is supported here"
            return re.sub(r"\$\{([\w:]+)\}", lambda m: values[m.group(1)], arg)
        if key == "Fn::If":
            name, if_true, if_false = arg
            return evaluate(if_true if conditions[name] else if_false, values, conditions)
        if key == "Fn::Equals":
            left, right = (evaluate(item, values, conditions) for item in arg)
            return left == right
        if key == "Fn::Not":
            return not evaluate(arg[0], values, conditions)
        assert not key.startswith("Fn::"), f"{key} is not supported by this evaluator"
    evaluated = {key: evaluate(value, values, conditions) for key, value in node.items()}
    return {key: value for key, value in evaluated.items() if value is not _NO_VALUE}


def evaluated_role(template: dict[str, Any], partition: str, account_id: str) -> dict[str, Any]:
    """What the template would create from its parameter defaults, in ``partition`` and ``account_id``.

    Returns ``expected_policies``' shape plus ``role_properties`` and ``rules`` (name -> passes).
    """
    values = {name: parameter["Default"] for name, parameter in template["Parameters"].items()}
    # Ref of an AWS::IAM::Role is its name.
    values.update({"AWS::Partition": partition, "AWS::AccountId": account_id, "Role": values["RoleName"]})
    conditions: dict[str, bool] = {}
    for name, expression in template["Conditions"].items():
        conditions[name] = evaluate(expression, values, conditions)
    resources = template["Resources"]
    role = evaluate(resources["Role"]["Properties"], values, conditions)
    inline = {}
    for resource in resources.values():
        if resource["Type"] == "AWS::IAM::Policy" and conditions.get(resource.get("Condition", ""), True):
            properties = evaluate(resource["Properties"], values, conditions)
            assert properties["Roles"] == [values["RoleName"]], "an inline policy of this role only"
            inline[properties["PolicyName"]] = properties["PolicyDocument"]
    rules = {
        name: all(evaluate(assertion["Assert"], values, conditions) for assertion in rule["Assertions"])
        for name, rule in template["Rules"].items()
    }
    return {
        "trust_policy": role.pop("AssumeRolePolicyDocument"),
        "inline_policies": inline,
        "role_properties": role,
        "rules": rules,
    }


# --- The static template -----------------------------------------------------------------------------


def test_static_template_passes_cfn_lint() -> None:
    assert lint_findings(TEMPLATE_PATH.read_text(encoding="utf-8")) == []


def test_static_template_is_plain_yaml_that_round_trips() -> None:
    # Long-form intrinsics only: short forms (!Sub, !If) are YAML tags, which safe_load refuses.
    template = load_template()
    assert yaml.safe_load(yaml.safe_dump(template, sort_keys=False)) == template


def test_arns_are_built_with_the_partition_never_a_literal_aws() -> None:
    template = load_template()
    built = yaml.safe_dump({key: template[key] for key in ("Resources", "Outputs", "Conditions", "Rules")})
    assert "arn:aws" not in built
    assert built.count("arn:${AWS::Partition}:") == 6  # trust principal, 3 bucket ARNs, 2 object ARNs


def test_parameters_are_documented_grouped_and_labelled() -> None:
    template = load_template()
    parameters = template["Parameters"]
    interface = template["Metadata"]["AWS::CloudFormation::Interface"]
    grouped = [name for group in interface["ParameterGroups"] for name in group["Parameters"]]
    assert sorted(grouped) == sorted(parameters), "every parameter in exactly one group"
    assert set(interface["ParameterLabels"]) == set(parameters)
    assert "do not change" in interface["ParameterLabels"]["VendorAccountId"]["default"]
    assert "do not change" in interface["ParameterLabels"]["ExternalId"]["default"]
    for name, parameter in parameters.items():
        assert parameter["Type"] == "String", name
        assert parameter["Description"].strip(), name
        assert "AllowedPattern" in parameter, name
        assert "ConstraintDescription" in parameter, name
    assert parameters["RolePath"]["Default"] == "/"
    assert set(parameter_values(make_spec())) == set(parameters)


def test_rules_pin_the_stack_to_the_account_entered_in_foundational() -> None:
    template = load_template()
    assertions = template["Rules"]["DeployIntoTheEnteredAccount"]["Assertions"]
    (assertion,) = assertions
    assert assertion["Assert"] == {"Fn::Equals": [{"Ref": "CustomerAccountId"}, {"Ref": "AWS::AccountId"}]}
    # moto ignores Rules, so evaluate them: the entered account passes, any other does not.
    rendered = yaml.safe_load(render_template(make_spec()))
    in_entered_account = evaluated_role(rendered, "aws", CUSTOMER_ACCOUNT_ID)["rules"]
    in_another_account = evaluated_role(rendered, "aws", "444455556666")["rules"]
    assert in_entered_account == {"DeployIntoTheEnteredAccount": True}
    assert in_another_account == {"DeployIntoTheEnteredAccount": False}


def test_role_properties() -> None:
    role = load_template()["Resources"]["Role"]
    assert role["Type"] == "AWS::IAM::Role"
    assert role["Properties"]["MaxSessionDuration"] == 3600
    outputs = load_template()["Outputs"]
    assert outputs["RoleArn"]["Value"] == {"Fn::GetAtt": ["Role", "Arn"]}
    assert outputs["RoleName"]["Value"] == {"Ref": "Role"}
    assert outputs["ExternalId"]["Value"] == {"Ref": "ExternalId"}


# --- Parameter rules (moto does not check AllowedPattern or lengths) ---------------------------------

PARAMETER_SAMPLES: dict[str, tuple[list[str], list[str]]] = {
    "VendorAccountId": (
        ["123456789012", "000000000000"],
        [
            "",
            "12345678901",
            "1234567890123",
            "12345678901a",
            "1234-5678-9012",
            " 123456789012",
            "١٢٣٤٥٦٧٨٩٠١٢",
        ],
    ),
    "CustomerAccountId": (
        ["111122223333"],
        ["", "11112222333", "111122223333\n", "abcdefghijkl"],
    ),
    "ExternalId": (
        [destination.new_external_id(), "ab", "a" * 1224, "olx-a+b=c,d.e@f:g/h_i-j"],
        ["", "a", "a" * 1225, "has space", "semi;colon", "star*", "ünïcode-external-id", "quote'"],
    ),
    "RoleName": (
        ["r", "a" * 64, "FoundationalOpenLineageExport", "a+b=c,d.e@f_g-h"],
        ["", "a" * 65, "with/slash", "with space", "star*", "colon:", "ünï"],
    ),
    "RolePath": (
        ["/", "/integrations/", "/a/b-c/d_e/", "/" + "a" * 510 + "/"],
        ["", "integrations/", "/integrations", "//", "/a//b/", "/sp ace/", "/star*/", "/" + "a" * 511 + "/"],
    ),
    "PermissionsBoundaryArn": (
        [
            "",
            BOUNDARY_ARN,
            "arn:aws:iam::aws:policy/PowerUserAccess",
            "arn:aws-cn:iam::111122223333:policy/path/to/Boundary",
            "arn:aws-us-gov:iam::111122223333:policy/Boundary",
        ],
        [
            "DeveloperBoundary",
            "arn:aws:iam::111122223333:role/Boundary",
            "arn:aws:iam::12345:policy/Boundary",
            "arn:aws:iam::111122223333:policy/",
            "arn:aws:iam::111122223333:policy/*",
            "arn:other:iam::111122223333:policy/Boundary",
        ],
    ),
    "BucketName": (
        ["abc", "my.bucket-1", "a" * 63, "1.2-3"],
        [
            "",
            "ab",
            "a" * 64,
            "My-Bucket",
            "-abc",
            "abc-",
            ".abc",
            "s3://abc",
            "abc/def",
            "under_score",
            "a b c",
        ],
    ),
    "Prefix": (
        ["", "a", "a/b/c", "foundational/openlineage", "x!_.'()=+-y", ".hidden/..x/x..", "a" * 992],
        [
            "/a",
            "a/",
            "a//b",
            "a/*",
            "a?",
            "a$b",
            "${aws:username}",
            "a b",
            ".",
            "..",
            "a/./b",
            "a/../b",
            "a/..",
            "a" * 993,
            "é",
            "a\nb",
        ],
    ),
    "KmsKeyArn": (
        ["", KMS_KEY_ARN, "arn:aws-us-gov:kms:us-gov-west-1:111122223333:key/mrk-1234abcd"],
        [
            "alias/export",
            "arn:aws:kms:us-east-1:111122223333:alias/export",
            "arn:aws:kms:us-east-1:111122223333:key/*",
            "arn:aws:kms:us-east-1:1111:key/1234",
            "1234abcd-12ab-34cd-56ef-1234567890ab",
            "arn:aws:kms:us-east-1:١١١١٢٢٢٢٣٣٣٣:key/1234abcd",
        ],
    ),
}


def accepted_by_template(name: str, value: str) -> bool:
    """Whether CloudFormation would accept ``value`` for parameter ``name`` (pattern and lengths).

    ``re.ASCII`` because CloudFormation evaluates AllowedPattern as a Java regex, where ``\\w`` and
    ``\\d`` are ASCII only; ``fullmatch`` because a pattern must cover the whole value.
    """
    parameter = load_template()["Parameters"][name]
    return (
        parameter.get("MinLength", 0) <= len(value) <= parameter.get("MaxLength", 4096)
        and re.fullmatch(parameter["AllowedPattern"], value, re.ASCII) is not None
    )


@pytest.mark.parametrize("name", sorted(PARAMETER_SAMPLES))
def test_parameter_patterns_accept_good_values_and_reject_bad_ones(name: str) -> None:
    good, bad = PARAMETER_SAMPLES[name]
    assert [value for value in good if not accepted_by_template(name, value)] == []
    assert [value for value in bad if accepted_by_template(name, value)] == []


_PARSERS: dict[str, Callable[[str], str | None]] = {
    "VendorAccountId": destination.parse_account_id,
    "CustomerAccountId": destination.parse_account_id,
    "RoleName": destination.parse_role_name,
    "RolePath": destination.parse_role_path,
    "PermissionsBoundaryArn": destination.parse_permissions_boundary_arn,
    "Prefix": destination.parse_prefix,
    "KmsKeyArn": destination.parse_kms_key_arn,
    "BucketName": destination.parse_bucket_name,
}


def stored_unchanged_by_form(name: str, value: str) -> bool:
    """Whether the setup form would store ``value`` exactly as it is (None counts as '')."""
    try:
        return (_PARSERS[name](value) or "") == value
    except FieldError:
        return False


# Includes non-ASCII digits: Python's \d matches them unless re.ASCII, CloudFormation's (Java) does not.
_FORM_SAMPLES = [
    pytest.param(name, value, id=f"{name}-{index}")
    for name in sorted(_PARSERS)
    for index, value in enumerate(PARAMETER_SAMPLES[name][0] + PARAMETER_SAMPLES[name][1])
]


@pytest.mark.parametrize(("name", "value"), _FORM_SAMPLES)
def test_template_accepts_exactly_the_values_the_setup_form_stores(name: str, value: str) -> None:
    if stored_unchanged_by_form(name, value):
        assert accepted_by_template(name, value)
    # The bucket's rules in the form (no '..', not an IP, reserved names) are stricter than a
    # pattern can say; everywhere else the two agree exactly.
    elif name != "BucketName":
        assert not accepted_by_template(name, value)


@pytest.mark.parametrize("case", sorted(DEPLOY_CASES))
def test_rendered_defaults_satisfy_the_parameter_rules(case: str) -> None:
    rendered = yaml.safe_load(render_template(DEPLOY_CASES[case]))
    for name, parameter in rendered["Parameters"].items():
        assert accepted_by_template(name, parameter["Default"]), (name, parameter["Default"])


@pytest.mark.parametrize(
    ("change", "parameter"),
    [
        ({"prefix": "exports/*"}, "Prefix"),
        ({"prefix": "a\nResources: {}"}, "Prefix"),
        ({"role_name": "x" * 65}, "RoleName"),
        ({"external_id": "has space"}, "ExternalId"),
        ({"customer_account_id": "12345"}, "CustomerAccountId"),
        ({"kms_key_arn": "alias/export"}, "KmsKeyArn"),
    ],
)
def test_render_refuses_values_the_stack_would_reject(change: dict[str, str], parameter: str) -> None:
    with pytest.raises(TemplateValueError, match=parameter):
        render_template(make_spec(**change))


# --- Rendering ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(DEPLOY_CASES))
def test_render_only_sets_parameter_defaults(case: str) -> None:
    spec = DEPLOY_CASES[case]
    expected = load_template()
    for name, value in parameter_values(spec).items():
        expected["Parameters"][name]["Default"] = value
    assert yaml.safe_load(render_template(spec)) == expected


def test_parameter_values_map_every_field_of_the_spec() -> None:
    spec = DEPLOY_CASES["all-options"]
    assert parameter_values(spec) == {
        "VendorAccountId": VENDOR_ACCOUNT_ID,
        "ExternalId": spec.external_id,
        "NewExternalId": "",
        "CustomerAccountId": CUSTOMER_ACCOUNT_ID,
        "RoleName": spec.role_name,
        "RolePath": "/a/b/",
        "PermissionsBoundaryArn": BOUNDARY_ARN,
        "BucketName": "acme-lineage",
        "Prefix": "x",
        "KmsKeyArn": KMS_KEY_ARN,
    }
    assert parameter_values(make_spec())["KmsKeyArn"] == ""
    assert parameter_values(make_spec())["PermissionsBoundaryArn"] == ""


@pytest.mark.parametrize(
    ("role_name", "file_name"),
    [
        ("FoundationalOpenLineageExport", "openlineage-export-FoundationalOpenLineageExport.yaml"),
        ("ol.export_role-1", "openlineage-export-ol.export_role-1.yaml"),
        ("a+b=c,d@e", "openlineage-export-a-b-c-d-e.yaml"),
        ("@@", "openlineage-export-role.yaml"),
        (None, "openlineage-export-role.yaml"),
    ],
)
def test_download_name_uses_only_safe_characters(role_name: str | None, file_name: str) -> None:
    name = download_name(build_connector(role_name=role_name))
    assert name == file_name
    assert re.fullmatch(r"[A-Za-z0-9_.-]+", name)


@pytest.mark.parametrize("partition", ["aws", "aws-cn", "aws-us-gov"])
@pytest.mark.parametrize("case", sorted(DEPLOY_CASES))
def test_template_policies_equal_expected_in_every_partition(case: str, partition: str) -> None:
    # moto always resolves AWS::Partition to "aws"; the evaluator (checked against moto for "aws" in
    # the deploy test) shows the other partitions.
    spec = DEPLOY_CASES[case]
    role = evaluated_role(yaml.safe_load(render_template(spec)), partition, CUSTOMER_ACCOUNT_ID)
    expected = expected_policies(spec, partition)
    assert role["trust_policy"] == expected["trust_policy"]
    assert role["inline_policies"] == expected["inline_policies"]
    assert role["role_properties"].get("PermissionsBoundary") == spec.permissions_boundary_arn


# --- Deploying the rendered template -----------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(DEPLOY_CASES))
def test_rendered_template_lints_deploys_and_creates_exactly_the_intended_role(aws: str, case: str) -> None:
    spec = DEPLOY_CASES[case]
    body = render_template(spec)
    assert lint_findings(body) == []

    cloudformation = customer_client(aws, "cloudformation")
    # As the admin does it: upload the file, change no parameter, acknowledge named IAM resources.
    cloudformation.create_stack(
        StackName="FoundationalOpenLineageExport", TemplateBody=body, Capabilities=["CAPABILITY_NAMED_IAM"]
    )
    stack = cloudformation.describe_stacks(StackName="FoundationalOpenLineageExport")["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
    role_arn = destination.role_arn("aws", CUSTOMER_ACCOUNT_ID, spec.role_path, spec.role_name)
    outputs = {output["OutputKey"]: output["OutputValue"] for output in stack["Outputs"]}
    assert outputs == {"RoleArn": role_arn, "RoleName": spec.role_name, "ExternalId": spec.external_id}

    iam = customer_client(aws, "iam")
    role = iam.get_role(RoleName=spec.role_name)["Role"]
    assert role["Arn"] == role_arn
    assert role["Path"] == spec.role_path
    assert role["MaxSessionDuration"] == 3600
    boundary = role.get("PermissionsBoundary", {}).get("PermissionsBoundaryArn")
    assert boundary == spec.permissions_boundary_arn

    expected = expected_policies(spec)
    trust_policy = json_document(role["AssumeRolePolicyDocument"])
    assert trust_policy == expected["trust_policy"]
    names = iam.list_role_policies(RoleName=spec.role_name)["PolicyNames"]
    assert sorted(names) == sorted(expected["inline_policies"])
    assert (KMS_POLICY_NAME in names) == bool(spec.kms_key_arn)
    assert S3_POLICY_NAME in names
    inline = {
        name: json_document(iam.get_role_policy(RoleName=spec.role_name, PolicyName=name)["PolicyDocument"])
        for name in names
    }
    assert inline == expected["inline_policies"]
    assert iam.list_attached_role_policies(RoleName=spec.role_name)["AttachedPolicies"] == []

    # The evaluator used for other partitions and for Rules agrees with moto where moto can answer.
    evaluated = evaluated_role(yaml.safe_load(body), "aws", CUSTOMER_ACCOUNT_ID)
    assert evaluated["trust_policy"] == trust_policy
    assert evaluated["inline_policies"] == inline
