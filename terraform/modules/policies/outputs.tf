output "trust_policy_json" {
  description = "The role's trust policy (assume role policy) as a JSON string."
  value       = jsonencode(local.trust_policy)
}

output "s3_policy_name" {
  description = "Name of the inline policy that grants the S3 permissions."
  value       = local.s3_policy_name
}

output "s3_policy_json" {
  description = "The inline S3 policy as a JSON string."
  value       = jsonencode(local.s3_policy)
}

output "kms_policy_name" {
  description = "Name of the inline policy that grants the KMS permissions."
  value       = local.kms_policy_name
}

output "kms_policy_json" {
  description = "The inline KMS policy as a JSON string, or null when no KMS key ARN is given."
  value       = var.kms_key_arn == null ? null : jsonencode(local.kms_policy)
}

output "inline_policies" {
  description = "Every inline policy the role gets, as a map of policy name to JSON string."
  value = merge(
    { (local.s3_policy_name) = jsonencode(local.s3_policy) },
    var.kms_key_arn == null ? {} : { (local.kms_policy_name) = jsonencode(local.kms_policy) },
  )
}
