# The public bucket of the quick-create link: the CloudFormation console fetches the static role
# template anonymously from its templateURL, so objects under var.template_prefix are world-readable,
# and nothing else is (modules/policies: template_bucket_policy). Versioned, so a template a customer's
# stack was created from stays retrievable.

resource "aws_s3_bucket" "templates" {
  #checkov:skip=CKV_AWS_144:The template is published from the repository by every apply; a replica in another Region would add nothing a re-apply does not.
  #checkov:skip=CKV2_AWS_62:Nothing reacts to new template versions: event notifications would have no consumer.
  #checkov:skip=CKV_AWS_18:Server access logs go to an existing log bucket when var.s3_access_log_bucket is set (a public read-only bucket needs no log bucket of its own).
  #checkov:skip=CKV2_AWS_6:The bucket has a public access block: ACLs blocked and ignored, the public policy allowed by design (see CKV_AWS_54 on aws_s3_bucket_public_access_block.templates).
  #checkov:skip=CKV_AWS_145:Anonymous readers cannot use a KMS key: SSE-KMS would make the public template unreadable. SSE-S3 (AES256) encrypts it at rest.
  bucket = local.template_bucket_name
  tags   = local.tags
}

resource "aws_s3_bucket_versioning" "templates" {
  bucket = aws_s3_bucket.templates.id

  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "templates" {
  bucket = aws_s3_bucket.templates.id

  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

resource "aws_s3_bucket_ownership_controls" "templates" {
  bucket = aws_s3_bucket.templates.id

  rule {
    object_ownership = "BucketOwnerEnforced" # no ACLs: the bucket policy alone decides
  }
}

resource "aws_s3_bucket_public_access_block" "templates" {
  #checkov:skip=CKV_AWS_54:The bucket policy is public by design: anonymous s3:GetObject under the template prefix only (the quick-create link); tests/test_deploy_policies.py checks it opens nothing else.
  #checkov:skip=CKV_AWS_56:Same reason: restricting public buckets would refuse the anonymous reads the quick-create link needs.
  bucket                  = aws_s3_bucket.templates.id
  block_public_acls       = true
  ignore_public_acls      = true
  block_public_policy     = false
  restrict_public_buckets = false
}

resource "aws_s3_bucket_policy" "templates" {
  bucket = aws_s3_bucket.templates.id
  policy = module.policies.template_bucket_policy_json

  depends_on = [aws_s3_bucket_public_access_block.templates, aws_s3_bucket_ownership_controls.templates]
}

resource "aws_s3_bucket_lifecycle_configuration" "templates" {
  bucket = aws_s3_bucket.templates.id

  rule {
    id     = "old-template-versions"
    status = "Enabled"

    filter {}

    # Stacks keep the template they were created from; old versions are only for looking back.
    noncurrent_version_expiration {
      noncurrent_days = 730
    }

    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }
}

resource "aws_s3_bucket_logging" "templates" {
  count = var.s3_access_log_bucket == null ? 0 : 1

  bucket        = aws_s3_bucket.templates.id
  target_bucket = var.s3_access_log_bucket
  target_prefix = "${local.template_bucket_name}/"
}

resource "aws_s3_object" "role_template" {
  # Public: encrypted with SSE-S3 (the bucket default), which anonymous readers can read; not SSE-KMS.
  bucket        = aws_s3_bucket.templates.id
  key           = "${var.template_prefix}/openlineage-export-role.yaml"
  source        = local.role_template_path
  source_hash   = filemd5(local.role_template_path)
  content_type  = "text/yaml"
  cache_control = "no-cache" # a new release's template is read at once

  depends_on = [aws_s3_bucket_server_side_encryption_configuration.templates]
  tags       = local.tags
}
