variable "partition" {
  description = "AWS partition the ARNs are built for: aws, aws-cn or aws-us-gov (the parent module passes data.aws_partition)."
  type        = string

  validation {
    condition     = can(regex("^aws(-cn|-us-gov|-iso|-iso-b|-iso-e|-iso-f|-eusc)?$", var.partition))
    error_message = "The partition must be an AWS partition name such as aws, aws-cn or aws-us-gov."
  }
}

variable "vendor_account_id" {
  description = "Foundational's AWS account ID: the only principal the trust policy allows."
  type        = string
}

variable "external_id" {
  description = "External ID that Foundational presents when it assumes the role."
  type        = string
}

variable "new_external_id" {
  description = "Only while Foundational rotates the External ID: the new one, trusted as well as external_id. Null otherwise."
  type        = string
  default     = null
}

variable "bucket_name" {
  description = "Name of the S3 bucket that receives the export."
  type        = string
}

variable "prefix" {
  description = "Folder inside the bucket, without leading or trailing '/'; empty for the bucket root."
  type        = string
  default     = ""
}

variable "kms_key_arn" {
  description = "ARN of the customer-managed KMS key that encrypts the bucket, or null when there is none."
  type        = string
  default     = null
}
