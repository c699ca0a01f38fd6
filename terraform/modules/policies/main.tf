# The role's policy documents, as pure values. The parent module validates the inputs; this module
# only shapes them, so the exact JSON the role gets can be computed without AWS credentials or a
# provider, and compared with what the CloudFormation template creates.

locals {
  # The CloudFormation template uses the same names: a role moved from one to the other keeps them.
  s3_policy_name  = "openlineage-export-s3"
  kms_policy_name = "openlineage-export-kms"

  bucket_arn = "arn:${var.partition}:s3:::${var.bucket_name}"
  # Objects directly under the prefix and below it; the whole bucket when the prefix is empty.
  objects_arn = var.prefix == "" ? "${local.bucket_arn}/*" : "${local.bucket_arn}/${var.prefix}/*"

  # One External ID is a string, two (during a rotation: current, new) a list, exactly as the
  # CloudFormation template writes them. Both branches of a conditional must have one type, so each is
  # JSON-encoded and the chosen one decoded.
  external_ids = jsondecode(
    var.new_external_id == null ? jsonencode(var.external_id) : jsonencode([var.external_id, var.new_external_id])
  )

  trust_policy = {
    Version = "2012-10-17"
    Statement = [
      {
        Sid       = "TrustVendorWithExternalId"
        Effect    = "Allow"
        Principal = { AWS = "arn:${var.partition}:iam::${var.vendor_account_id}:root" }
        Action    = "sts:AssumeRole"
        Condition = { StringEquals = { "sts:ExternalId" = local.external_ids } }
      },
    ]
  }

  # With an empty prefix the statement has no Condition key at all (not an empty one), exactly
  # like the CloudFormation template. An object-producing `for` drops the null attribute: a
  # conditional between objects of different shapes would not type-check.
  list_statement = {
    for key, value in {
      Sid      = "ListExportPrefix"
      Effect   = "Allow"
      Action   = "s3:ListBucket"
      Resource = local.bucket_arn
      Condition = var.prefix == "" ? null : {
        StringLike = { "s3:prefix" = [var.prefix, "${var.prefix}/*"] }
      }
    } : key => value if value != null
  }

  s3_policy = {
    Version = "2012-10-17"
    Statement = [
      local.list_statement,
      {
        Sid      = "LocateBucket"
        Effect   = "Allow"
        Action   = "s3:GetBucketLocation"
        Resource = local.bucket_arn
      },
      {
        Sid      = "ReadWriteExportObjects"
        Effect   = "Allow"
        Action   = ["s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject", "s3:PutObject", "s3:PutObjectTagging"]
        Resource = local.objects_arn
      },
    ]
  }

  kms_policy = {
    Version = "2012-10-17"
    Statement = [
      {
        Sid      = "UseExportKmsKey"
        Effect   = "Allow"
        Action   = ["kms:Decrypt", "kms:GenerateDataKey"]
        Resource = var.kms_key_arn
      },
    ]
  }
}
