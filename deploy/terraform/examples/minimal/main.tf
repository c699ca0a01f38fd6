# The smallest deployment: two availability zones, one NAT gateway, the module's default sizes.
# Apply from the repository checkout: the module publishes its cfn_templates/openlineage-export-role.yaml.

variable "image_tag" {
  description = "Tag of the product image to deploy (pushed to the module's ECR repository)."
  type        = string
}

variable "service_image_tag" {
  description = "Tag the services run while the migration of image_tag runs; null once migrated."
  type        = string
  default     = null
}

provider "aws" {
  region = "us-east-1"
}

module "openlineage_export" {
  source = "../../"

  name            = "olx-prod"
  domain_name     = "lineage.example.com"
  certificate_arn = "arn:aws:acm:us-east-1:111122223333:certificate/0f3c9e58-1d2b-4c8a-9e7f-5a6b7c8d9e0f"
  route53_zone_id = "Z0123456789ABCDEFGHIJ"

  # deploy/scripts/upgrade sets both: the release to migrate to, and the one the services keep
  # running until the migration has succeeded.
  image_tag         = var.image_tag
  service_image_tag = var.service_image_tag

  alarm_emails = ["oncall@example.com"]
}

output "portal_url" {
  description = "The portal's address."
  value       = module.openlineage_export.portal_url
}

output "ecr_repository_url" {
  description = "Where to push the product image."
  value       = module.openlineage_export.ecr_repository_url
}

output "migration" {
  description = "The migration task (run once before new tasks start)."
  value       = module.openlineage_export.migration
}

output "vendor_aws_account_id" {
  description = "VENDOR_AWS_ACCOUNT_ID: the account customer roles trust."
  value       = module.openlineage_export.vendor_aws_account_id
}
