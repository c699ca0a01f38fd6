# The IAM role Foundational assumes to write the OpenLineage export into this account's bucket.
# It is the same role as the CloudFormation template creates: same trust policy, same inline
# policies (names and documents), same path, boundary and session length.

data "aws_partition" "current" {}

data "aws_caller_identity" "current" {}

locals {
  # The portal stores "no key" and "no boundary" as empty; accept "" as well as null here.
  kms_key_arn              = var.kms_key_arn == "" ? null : var.kms_key_arn
  permissions_boundary_arn = var.permissions_boundary_arn == "" ? null : var.permissions_boundary_arn
  new_external_id          = var.new_external_id == "" ? null : var.new_external_id
}

# The policy documents are computed by a provider-free submodule, so they can be evaluated (and
# tested) offline with `terraform apply` and compared with the CloudFormation template's.
module "policies" {
  source = "./modules/policies"

  partition         = data.aws_partition.current.partition
  vendor_account_id = var.vendor_account_id
  external_id       = var.external_id
  new_external_id   = local.new_external_id
  bucket_name       = var.bucket_name
  prefix            = var.prefix
  kms_key_arn       = local.kms_key_arn
}

resource "aws_iam_role" "this" {
  # The trust policy names Foundational's account root with an sts:ExternalId condition: AWS's
  # documented pattern for third-party access, and the same trust as the CloudFormation template.
  # Which principals of that account may assume the role is decided by IAM policies in that account.
  #checkov:skip=CKV_AWS_61:Cross-account trust of the vendor account root, bound to an External ID.
  name                 = var.role_name
  path                 = var.role_path
  description          = "Assumed by Foundational to write the OpenLineage export to S3."
  assume_role_policy   = module.policies.trust_policy_json
  permissions_boundary = local.permissions_boundary_arn
  max_session_duration = 3600
  tags                 = var.tags

  lifecycle {
    precondition {
      condition     = var.account_id == null || var.account_id == data.aws_caller_identity.current.account_id
      error_message = "These credentials are for another AWS account than the one entered in Foundational (account_id). Switch to that account, or correct the account ID in Foundational and download the module again."
    }
  }
}

# Inline policies (not managed ones), as in the CloudFormation template: they live and die with
# the role and cannot be attached to anything else by mistake.
resource "aws_iam_role_policy" "s3" {
  name   = module.policies.s3_policy_name
  role   = aws_iam_role.this.id
  policy = module.policies.s3_policy_json
}

resource "aws_iam_role_policy" "kms" {
  count = local.kms_key_arn == null ? 0 : 1

  name   = module.policies.kms_policy_name
  role   = aws_iam_role.this.id
  policy = module.policies.kms_policy_json
}
