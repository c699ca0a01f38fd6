# The rules mirror the portal's setup form (lineage_core/destination.py), so a value Foundational
# accepted is accepted here, and a typo fails at `terraform plan` with the same explanation.
# Conditions wrap every test in can() or try(): Terraform evaluates both sides of || and && even
# when the left side decides, and a function given null would otherwise fail with an unhelpful
# error. Lengths are checked with length(), not regex repeats: Go's regexp caps repeats at 1000.

variable "vendor_account_id" {
  description = "Foundational's AWS account ID, the only account the role trusts. Copied from the setup page: do not change."
  type        = string

  validation {
    condition     = can(regex("^[0-9]{12}$", var.vendor_account_id))
    error_message = "Foundational's AWS account ID is exactly 12 digits. Copy it unchanged from the Foundational setup page."
  }
}

variable "external_id" {
  description = "External ID that Foundational presents when it assumes the role. Copied from the setup page: do not change."
  type        = string

  validation {
    condition     = can(regex("^[\\w+=,.@:/-]+$", var.external_id)) && try(length(var.external_id) >= 2 && length(var.external_id) <= 1224, false)
    error_message = "The External ID has 2 to 1224 characters: letters, digits and + = , . @ : / _ -. Copy it unchanged from the Foundational setup page."
  }
}

variable "new_external_id" {
  description = "Only while Foundational rotates this connection's External ID: the new External ID, which the role then accepts as well as external_id. Null or empty otherwise. Copied from the setup page: do not change."
  type        = string
  default     = null

  validation {
    condition     = var.new_external_id == null || var.new_external_id == "" || (can(regex("^[\\w+=,.@:/-]+$", var.new_external_id)) && try(length(var.new_external_id) >= 2 && length(var.new_external_id) <= 1224, false))
    error_message = "The new External ID has 2 to 1224 characters: letters, digits and + = , . @ : / _ -. Copy it unchanged from the Foundational setup page."
  }
}

variable "account_id" {
  description = "The AWS account that owns the bucket, as entered in Foundational. When set, Terraform refuses to create the role with credentials of any other account."
  type        = string
  default     = null

  validation {
    condition     = var.account_id == null || can(regex("^[0-9]{12}$", var.account_id))
    error_message = "An AWS account ID is exactly 12 digits (for example: 123456789012)."
  }
}

variable "bucket_name" {
  description = "Name of the S3 bucket that receives the export, without s3://."
  type        = string

  validation {
    condition     = !can(regex("^(s3://|arn:|https?://)", lower(var.bucket_name)))
    error_message = "Enter only the bucket name, without s3://, an ARN or a URL (for example: my-bucket)."
  }

  validation {
    condition     = !can(regex("/", var.bucket_name))
    error_message = "A bucket name has no '/'. Put folders in the prefix variable."
  }

  validation {
    condition     = can(regex("^.{3,63}$", var.bucket_name))
    error_message = "A bucket name has 3 to 63 characters."
  }

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9.-]*[a-z0-9]$", var.bucket_name))
    error_message = "A bucket name has only lowercase letters, digits, '.' and '-', and starts and ends with a letter or digit."
  }

  validation {
    condition     = !can(regex("\\.\\.|\\.-|-\\.", var.bucket_name))
    error_message = "A bucket name has no '..', '.-' or '-.'."
  }

  validation {
    condition     = !can(regex("^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$", var.bucket_name))
    error_message = "A bucket name cannot look like an IP address."
  }

  validation {
    condition     = !can(regex("^(xn--|sthree-|amzn-s3-demo-)|(-s3alias|--ol-s3|\\.mrap|--x-s3|--table-s3)$", var.bucket_name))
    error_message = "That bucket name uses a prefix or suffix that AWS reserves."
  }
}

variable "prefix" {
  description = "Folder inside the bucket for the export, without leading or trailing '/' (for example: foundational/openlineage). Empty for the bucket root."
  type        = string
  default     = ""

  validation {
    condition     = !can(regex("^/|/$", var.prefix))
    error_message = "Write the prefix without a leading or trailing '/' (for example: foundational/openlineage)."
  }

  validation {
    condition     = !can(regex("//", var.prefix))
    error_message = "The prefix cannot contain empty folders ('//')."
  }

  validation {
    condition     = !can(regex("(^|/)\\.{1,2}(/|$)", var.prefix))
    error_message = "The prefix cannot contain '.' or '..' folders."
  }

  # '*', '?' and '$' would widen the IAM grant (wildcards, policy variables): never allowed.
  validation {
    condition     = can(regex("^[A-Za-z0-9!_.'()=+/-]*$", var.prefix))
    error_message = "The prefix may contain letters, digits, '/' between folders, and ! _ . ' ( ) = + -. Spaces, '*', '?', '$' and other characters are not allowed."
  }

  # The longest key written under the prefix is "<prefix>/.foundational-export-writecheck" (31
  # characters), and S3 keys are at most 1024 bytes.
  validation {
    condition     = try(length(var.prefix) <= 992, false)
    error_message = "The prefix is too long: object keys under it would exceed 1024 bytes (at most 992 characters)."
  }
}

variable "role_name" {
  description = "Name of the IAM role, as entered in Foundational."
  type        = string

  validation {
    condition     = can(regex("^.{1,64}$", var.role_name))
    error_message = "An IAM role name has 1 to 64 characters."
  }

  validation {
    condition     = can(regex("^[\\w+=,.@-]*$", var.role_name))
    error_message = "An IAM role name has only letters, digits and + = , . @ _ -."
  }
}

variable "role_path" {
  description = "Path of the IAM role, as entered in Foundational (for example: /integrations/)."
  type        = string
  default     = "/"

  validation {
    condition     = can(regex("^/([\\w+=,.@-]+/)*$", var.role_path)) && try(length(var.role_path) <= 512, false)
    error_message = "A role path is '/' or folders of letters, digits and + = , . @ _ - between slashes (for example: /integrations/), at most 512 characters."
  }
}

variable "kms_key_arn" {
  description = "ARN of the customer-managed KMS key the bucket's default encryption uses (SSE-KMS). Null or empty when the bucket uses SSE-S3."
  type        = string
  default     = null

  validation {
    condition     = var.kms_key_arn == null || var.kms_key_arn == "" || can(regex("^arn:aws(-cn|-us-gov|-iso|-iso-b|-iso-e|-iso-f|-eusc)?:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]{1,128}$", var.kms_key_arn))
    error_message = "Enter the key's full ARN (arn:aws:kms:<region>:<account>:key/<key-id>). Aliases are not accepted: IAM grants apply to the key ARN."
  }
}

variable "permissions_boundary_arn" {
  description = "ARN of the managed policy to set as the role's permissions boundary. Null or empty for none."
  type        = string
  default     = null

  validation {
    condition     = var.permissions_boundary_arn == null || var.permissions_boundary_arn == "" || can(regex("^arn:aws(-cn|-us-gov|-iso|-iso-b|-iso-e|-iso-f|-eusc)?:iam::([0-9]{12}|aws):policy/([\\w+=,.@-]+/)*[\\w+=,.@-]{1,128}$", var.permissions_boundary_arn))
    error_message = "Enter a managed policy ARN (arn:aws:iam::<account>:policy/<name>)."
  }
}

variable "tags" {
  description = "Tags to add to the role."
  type        = map(string)
  default     = {}
}
