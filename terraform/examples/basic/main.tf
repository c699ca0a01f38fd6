# Creates the role for one OpenLineage export connection. Copy the values from the Foundational
# setup page (or download the ready-made configuration there, which is this file filled in).

provider "aws" {
  region = "us-east-1"
}

module "openlineage_export_role" {
  source = "../../"

  # Filled in by Foundational for this connection: do not change.
  vendor_account_id = "123456789012"
  external_id       = "olx-3q9V0mX2bK7wTzL1pN8rYc5dHf4sJ6gA"

  # Your AWS account and the role, as entered in Foundational.
  account_id = "210987654321"
  role_name  = "foundational-openlineage-export"
  role_path  = "/integrations/"

  # Export destination.
  bucket_name = "acme-data-lineage"
  prefix      = "foundational/openlineage"

  tags = {
    Purpose = "foundational-openlineage-export"
  }
}

output "role_arn" {
  description = "ARN of the role Foundational assumes."
  value       = module.openlineage_export_role.role_arn
}
