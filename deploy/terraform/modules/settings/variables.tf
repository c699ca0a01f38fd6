variable "vendor_aws_account_id" {
  description = "The AWS account the services run in: the principal customer roles trust (VENDOR_AWS_ACCOUNT_ID)."
  type        = string

  validation {
    condition     = can(regex("^[0-9]{12}$", var.vendor_aws_account_id))
    error_message = "The vendor AWS account ID must be 12 digits."
  }
}

variable "aws_region" {
  description = "Region for STS and the first S3 call (AWS_REGION)."
  type        = string

  validation {
    condition     = can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]$", var.aws_region))
    error_message = "The region must be an AWS Region name such as us-east-1."
  }
}

variable "export_queue" {
  description = "RQ queue of export jobs (EXPORT_QUEUE); the worker also listens to <queue>-schedule and <queue>-derive."
  type        = string
  default     = "exports"

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,64}$", var.export_queue))
    error_message = "The export queue may contain only letters, digits, '_' and '-' (1 to 64 characters)."
  }
}

variable "portal_port" {
  description = "Port gunicorn listens on, on the task's loopback (PORTAL_PORT)."
  type        = number
  default     = 8000

  validation {
    condition     = var.portal_port >= 1024 && var.portal_port <= 65535 && floor(var.portal_port) == var.portal_port
    error_message = "The portal port must be a whole number from 1024 to 65535."
  }
}

variable "proxy_port" {
  description = "Port the web task's proxy listens on for the load balancer."
  type        = number
  default     = 8080

  validation {
    condition     = var.proxy_port >= 1024 && var.proxy_port <= 65535 && floor(var.proxy_port) == var.proxy_port
    error_message = "The proxy port must be a whole number from 1024 to 65535."
  }
}

variable "web_threads" {
  description = "Threads per gunicorn worker (WEB_THREADS)."
  type        = number
  default     = 4

  validation {
    condition     = var.web_threads >= 1 && var.web_threads <= 64 && floor(var.web_threads) == var.web_threads
    error_message = "The web threads must be a whole number from 1 to 64."
  }
}

variable "web_concurrency" {
  description = "gunicorn workers per web task (WEB_CONCURRENCY)."
  type        = number
  default     = 2

  validation {
    condition     = var.web_concurrency >= 1 && var.web_concurrency <= 256 && floor(var.web_concurrency) == var.web_concurrency
    error_message = "The web concurrency must be a whole number from 1 to 256."
  }
}

variable "secret_arns" {
  description = "ARNs of the Secrets Manager secrets ECS injects: SECRET_KEY, DATABASE_URL, REDIS_URL, METRICS_TOKEN."
  type = object({
    secret_key    = string
    database_url  = string
    redis_url     = string
    metrics_token = string
  })

  validation {
    condition = alltrue([
      for arn in values(var.secret_arns) : can(regex("^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:.+$", arn))
    ])
    error_message = "Every secret ARN must be a Secrets Manager secret ARN."
  }
}

variable "cfn_template_base_url" {
  description = "HTTPS URL of the folder that serves the static CloudFormation template, ending in '/' (CFN_TEMPLATE_BASE_URL)."
  type        = string

  validation {
    condition     = can(regex("^https://[^/?#]+/([^?#]*/)?$", var.cfn_template_base_url))
    error_message = "The template base URL must be an https:// URL ending in '/'."
  }
}

variable "deployment" {
  description = "Name of the deployment: a dimension of every metric the collector publishes."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,23}$", var.deployment))
    error_message = "The deployment name must be 2 to 24 lowercase letters, digits or '-', starting with a letter."
  }
}

variable "metrics" {
  description = "Where the collector scrapes /metrics (the portal's public host name), how often, and where it writes."
  type = object({
    host             = string
    interval_seconds = number
    namespace        = string
    log_group_name   = string
  })

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$", var.metrics.host))
    error_message = "The metrics host must be a DNS name such as lineage.example.com."
  }

  validation {
    condition     = contains([10, 30, 60], var.metrics.interval_seconds)
    error_message = "The scrape interval must be 10, 30 or 60 seconds."
  }
}
