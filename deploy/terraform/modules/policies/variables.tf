variable "partition" {
  description = "AWS partition the ARNs are built for (the parent module passes data.aws_partition)."
  type        = string

  validation {
    condition     = can(regex("^aws(-cn|-us-gov|-iso|-iso-b|-iso-e|-iso-f|-eusc)?$", var.partition))
    error_message = "The partition must be an AWS partition name such as aws, aws-cn or aws-us-gov."
  }
}

variable "region" {
  description = "AWS Region of the deployment."
  type        = string

  validation {
    condition     = can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]$", var.region))
    error_message = "The region must be an AWS Region name such as us-east-1."
  }
}

variable "account_id" {
  description = "The vendor's AWS account ID: the account this deployment runs in (VENDOR_AWS_ACCOUNT_ID)."
  type        = string

  validation {
    condition     = can(regex("^[0-9]{12}$", var.account_id))
    error_message = "The account ID must be 12 digits."
  }
}

variable "execution" {
  description = "What the ECS task execution role reads at task start: ECR repository, log groups and secrets."
  type = object({
    repository_arn = string
    log_group_arns = list(string)
    secret_arns    = list(string)
    kms_key_arn    = string
  })

  validation {
    condition = (
      can(regex("^arn:[a-z-]+:ecr:[a-z0-9-]+:[0-9]{12}:repository/.+$", var.execution.repository_arn)) &&
      length(var.execution.log_group_arns) > 0 &&
      alltrue([for arn in var.execution.log_group_arns : can(regex("^arn:[a-z-]+:logs:[a-z0-9-]+:[0-9]{12}:log-group:[^*]+$", arn))]) &&
      length(var.execution.secret_arns) > 0 &&
      alltrue([for arn in var.execution.secret_arns : can(regex("^arn:[a-z-]+:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[^*]+$", arn))]) &&
      can(regex("^arn:[a-z-]+:kms:[a-z0-9-]+:[0-9]{12}:key/[0-9a-f-]+$", var.execution.kms_key_arn))
    )
    error_message = "The execution role's resources must be one ECR repository ARN, log group ARNs, secret ARNs and a KMS key ARN, without wildcards."
  }
}

variable "metrics_log_group_arn" {
  description = "The log group the metrics collector writes embedded-metric-format records to."
  type        = string

  validation {
    condition     = can(regex("^arn:[a-z-]+:logs:[a-z0-9-]+:[0-9]{12}:log-group:[^*]+$", var.metrics_log_group_arn))
    error_message = "The log group must be a CloudWatch Logs log group ARN without wildcards."
  }
}

variable "flow_log_group_arn" {
  description = "The log group VPC flow logs are delivered to."
  type        = string

  validation {
    condition     = can(regex("^arn:[a-z-]+:logs:[a-z0-9-]+:[0-9]{12}:log-group:[^*]+$", var.flow_log_group_arn))
    error_message = "The log group must be a CloudWatch Logs log group ARN without wildcards."
  }
}

variable "template_bucket" {
  description = "Name of the public bucket that serves the CloudFormation template, and the key prefix it opens."
  type = object({
    name   = string
    prefix = string
  })

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.template_bucket.name))
    error_message = "The template bucket name must be a valid S3 bucket name."
  }

  validation {
    # A wildcard or policy variable in the prefix would widen the public statement.
    condition     = can(regex("^[A-Za-z0-9!_.'()-]+(/[A-Za-z0-9!_.'()-]+)*$", var.template_bucket.prefix))
    error_message = "The template prefix must be a non-empty S3 key prefix without leading or trailing '/' and without '*', '?' or '$'."
  }
}
