# Every input is validated here, at plan time, so a wrong value stops `terraform plan` with a message
# naming it instead of failing half way through an apply.

variable "name" {
  description = "Name of the deployment: the prefix of every resource name and the Deployment dimension of its metrics."
  type        = string
  default     = "olx-prod"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,18}[a-z0-9]$", var.name))
    error_message = "The name must be 3 to 20 lowercase letters, digits or '-', starting with a letter and not ending with '-' (load balancer and target group names are limited to 32 characters)."
  }
}

variable "domain_name" {
  description = "Host name the portal is served on (https://<domain_name>/); the certificate must cover it."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$", var.domain_name))
    error_message = "The domain name must be a lowercase DNS name such as lineage.example.com."
  }
}

variable "certificate_arn" {
  description = "ARN of the ACM certificate for domain_name, in the deployment's Region."
  type        = string

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:acm:[a-z0-9-]+:[0-9]{12}:certificate/[0-9a-f-]+$", var.certificate_arn))
    error_message = "The certificate ARN must be an ACM certificate ARN (arn:aws:acm:<region>:<account>:certificate/<id>)."
  }
}

variable "route53_zone_id" {
  description = "Route 53 hosted zone to create domain_name's alias record in; null to manage DNS elsewhere."
  type        = string
  default     = null

  validation {
    condition     = var.route53_zone_id == null || can(regex("^Z[A-Z0-9]{1,31}$", var.route53_zone_id))
    error_message = "The Route 53 zone ID must look like Z0123456789ABCDEFGHIJ, or be null."
  }
}

variable "allowed_ingress_cidrs" {
  description = "IPv4 ranges that may reach the portal on HTTPS (443). Producers post lineage to it, so usually everywhere."
  type        = list(string)
  default     = ["0.0.0.0/0"]

  validation {
    condition     = length(var.allowed_ingress_cidrs) > 0 && alltrue([for cidr in var.allowed_ingress_cidrs : can(cidrnetmask(cidr))])
    error_message = "Give at least one IPv4 CIDR range, such as 0.0.0.0/0 or 203.0.113.0/24."
  }
}

variable "vpc_cidr" {
  description = "IPv4 range of the VPC the module creates."
  type        = string
  default     = "10.40.0.0/16"

  validation {
    condition     = can(cidrnetmask(var.vpc_cidr)) && tonumber(split("/", var.vpc_cidr)[1]) <= 20
    error_message = "The VPC CIDR must be an IPv4 range of /20 or larger."
  }
}

variable "availability_zones" {
  description = "Availability zones to use, 2 or 3 names; null for the Region's zones a and b. The database's standby and Redis's replica live in another zone than their primaries."
  type        = list(string)
  default     = null

  validation {
    condition = var.availability_zones == null || (
      try(length(var.availability_zones) >= 2 && length(var.availability_zones) <= 3, false) &&
      alltrue([for zone in coalesce(var.availability_zones, []) : can(regex("^[a-z]{2}(-[a-z]+)+-[0-9][a-z]$", zone))])
    )
    error_message = "Give 2 or 3 availability zone names such as [\"eu-west-1a\", \"eu-west-1b\"], or null."
  }
}

variable "nat_gateway_count" {
  description = "NAT gateways: 1 (cheaper; outbound traffic stops while its zone is down) or one per availability zone (at most as many as zones)."
  type        = number
  default     = 1

  validation {
    condition     = contains([1, 2, 3], var.nat_gateway_count)
    error_message = "The NAT gateway count must be 1, 2 or 3 (and at most the number of availability zones)."
  }
}

variable "image_tag" {
  description = "Tag of the product image in the module's ECR repository: the release the migration task runs."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", var.image_tag))
    error_message = "The image tag must be a Docker tag: letters, digits, '_', '.' and '-', at most 128 characters."
  }
}

variable "service_image_tag" {
  description = "Tag the web, worker and scheduler services run; null for image_tag. An upgrade sets it to the running tag while the migration runs (deploy/scripts/upgrade)."
  type        = string
  default     = null

  validation {
    condition     = var.service_image_tag == null || can(regex("^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", var.service_image_tag))
    error_message = "The service image tag must be a Docker tag, or null."
  }
}

variable "cpu_architecture" {
  description = "CPU architecture of the image and the Fargate tasks: X86_64 or ARM64."
  type        = string
  default     = "X86_64"

  validation {
    condition     = contains(["X86_64", "ARM64"], var.cpu_architecture)
    error_message = "The CPU architecture must be X86_64 or ARM64."
  }
}

variable "web" {
  description = "The web service: tasks (scaled on CPU between count and max_count), task size, gunicorn workers per task and threads per worker."
  type = object({
    count       = optional(number, 2)
    max_count   = optional(number, 4)
    cpu         = optional(number, 512)
    memory      = optional(number, 1024)
    concurrency = optional(number, 2)
    threads     = optional(number, 4)
  })
  default = {}

  validation {
    condition     = var.web.count >= 1 && var.web.max_count >= var.web.count && var.web.max_count <= 50
    error_message = "web.count must be at least 1 and web.max_count from web.count to 50."
  }

  validation {
    condition     = contains([256, 512, 1024, 2048, 4096], var.web.cpu) && var.web.memory >= 512 && var.web.memory <= 30720
    error_message = "web.cpu must be a Fargate CPU size (256, 512, 1024, 2048, 4096) and web.memory from 512 to 30720 MiB."
  }

  validation {
    condition     = var.web.concurrency >= 1 && var.web.concurrency <= 256 && floor(var.web.concurrency) == var.web.concurrency
    error_message = "web.concurrency (WEB_CONCURRENCY) must be a whole number from 1 to 256."
  }

  validation {
    condition     = var.web.threads >= 1 && var.web.threads <= 64 && floor(var.web.threads) == var.web.threads
    error_message = "web.threads (WEB_THREADS) must be a whole number from 1 to 64."
  }
}

variable "worker" {
  description = "The worker service: scaled on the export queue's depth between min_count and max_count, aiming at backlog_per_task waiting jobs per task."
  type = object({
    min_count        = optional(number, 1)
    max_count        = optional(number, 4)
    cpu              = optional(number, 1024)
    memory           = optional(number, 2048)
    backlog_per_task = optional(number, 5)
  })
  default = {}

  validation {
    condition     = var.worker.min_count >= 1 && var.worker.max_count >= var.worker.min_count && var.worker.max_count <= 100
    error_message = "worker.min_count must be at least 1 and worker.max_count from worker.min_count to 100."
  }

  validation {
    condition     = contains([256, 512, 1024, 2048, 4096, 8192], var.worker.cpu) && var.worker.memory >= 512 && var.worker.memory <= 61440
    error_message = "worker.cpu must be a Fargate CPU size (256 to 8192) and worker.memory from 512 to 61440 MiB."
  }

  validation {
    condition     = var.worker.backlog_per_task >= 1 && var.worker.backlog_per_task <= 1000
    error_message = "worker.backlog_per_task must be from 1 to 1000."
  }
}

variable "scheduler" {
  description = "Task size of the scheduler (always two tasks: one active by its lock, one hot standby)."
  type = object({
    cpu    = optional(number, 256)
    memory = optional(number, 512)
  })
  default = {}

  validation {
    condition     = contains([256, 512, 1024], var.scheduler.cpu) && var.scheduler.memory >= 512 && var.scheduler.memory <= 8192
    error_message = "scheduler.cpu must be 256, 512 or 1024 and scheduler.memory from 512 to 8192 MiB."
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

variable "database" {
  description = "The PostgreSQL instance (always Multi-AZ, encrypted, deletion-protected unless deletion_protection is false)."
  type = object({
    instance_class        = optional(string, "db.t4g.medium")
    engine_version        = optional(string, "16")
    allocated_storage     = optional(number, 20)
    max_allocated_storage = optional(number, 100)
    backup_retention_days = optional(number, 14)
  })
  default = {}

  validation {
    condition     = can(regex("^db\\.[a-z0-9]+\\.[a-z0-9]+$", var.database.instance_class))
    error_message = "database.instance_class must be an RDS instance class such as db.t4g.medium."
  }

  validation {
    condition     = can(regex("^(1[4-9]|2[0-9])(\\.[0-9]+)?$", var.database.engine_version))
    error_message = "database.engine_version must be a PostgreSQL version from 14, such as 16 or 16.4."
  }

  validation {
    condition     = var.database.allocated_storage >= 20 && var.database.max_allocated_storage >= var.database.allocated_storage
    error_message = "database.allocated_storage must be at least 20 GiB and max_allocated_storage at least allocated_storage."
  }

  validation {
    condition     = var.database.backup_retention_days >= 7 && var.database.backup_retention_days <= 35
    error_message = "database.backup_retention_days must be from 7 to 35."
  }
}

variable "redis" {
  description = "The Redis replication group of the queues: node type and node count (a primary and at least one replica in another zone)."
  type = object({
    node_type      = optional(string, "cache.t4g.small")
    node_count     = optional(number, 2)
    engine_version = optional(string, "7.1")
  })
  default = {}

  validation {
    condition     = can(regex("^cache\\.[a-z0-9]+\\.[a-z0-9]+$", var.redis.node_type))
    error_message = "redis.node_type must be an ElastiCache node type such as cache.t4g.small."
  }

  validation {
    condition     = var.redis.node_count >= 2 && var.redis.node_count <= 6
    error_message = "redis.node_count must be from 2 to 6: automatic failover needs a replica."
  }

  validation {
    condition     = can(regex("^7\\.[0-9]+$", var.redis.engine_version))
    error_message = "redis.engine_version must be a Redis 7 version such as 7.1 (the parameter group is of the redis7 family)."
  }
}

variable "secret_versions" {
  description = "Rotation counters of the generated secrets: raise one by 1 and apply to generate and set a new value (docs/deploy.md, Rotate secrets)."
  type = object({
    secret_key        = optional(number, 1)
    metrics_token     = optional(number, 1)
    database_password = optional(number, 1)
    redis_auth_token  = optional(number, 1)
  })
  default = {}

  validation {
    condition     = alltrue([for version in values(var.secret_versions) : version >= 1 && floor(version) == version])
    error_message = "Every secret version must be a whole number from 1."
  }
}

variable "deletion_protection" {
  description = "Protect the database and the load balancer from deletion. Turn off only to tear a deployment down."
  type        = bool
  default     = true
}

variable "log_retention_days" {
  description = "How long the CloudWatch log groups keep the containers' logs, flow logs and metric records."
  type        = number
  default     = 365

  validation {
    condition     = contains([365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "The log retention must be a CloudWatch Logs retention of at least one year: 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653 days."
  }
}

variable "alarm_emails" {
  description = "Addresses the alarm topic emails (each confirms its subscription once); more subscribers can be added to the topic."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for address in var.alarm_emails : can(regex("^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$", address))])
    error_message = "Every alarm email must be an email address."
  }
}

variable "alarm_thresholds" {
  description = "When the alarms fire: export jobs waiting, and the percentage of portal requests answered 5xx."
  type = object({
    queue_depth = optional(number, 100)
    web_5xx_pct = optional(number, 5)
  })
  default = {}

  validation {
    condition     = var.alarm_thresholds.queue_depth >= 1 && var.alarm_thresholds.web_5xx_pct > 0 && var.alarm_thresholds.web_5xx_pct <= 100
    error_message = "alarm_thresholds.queue_depth must be at least 1 and web_5xx_pct from 0 (exclusive) to 100."
  }
}

variable "template_bucket_name" {
  description = "Name of the public bucket that serves the CloudFormation template; null for <name>-templates-<account>-<region>."
  type        = string
  default     = null

  validation {
    condition     = var.template_bucket_name == null || can(regex("^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$", var.template_bucket_name))
    error_message = "The template bucket name must be 3 to 63 lowercase letters, digits or '-' (no dots: the template URL is virtual-hosted over HTTPS)."
  }
}

variable "template_prefix" {
  description = "Key prefix of the template objects: the only part of the template bucket the world may read."
  type        = string
  default     = "templates"

  validation {
    condition     = can(regex("^[A-Za-z0-9!_.'()-]+(/[A-Za-z0-9!_.'()-]+)*$", var.template_prefix))
    error_message = "The template prefix must be a non-empty S3 key prefix without leading or trailing '/' and without '*', '?' or '$'."
  }
}

variable "role_template_path" {
  description = "Path of the CloudFormation role template to publish; null for the checkout's cfn_templates/openlineage-export-role.yaml."
  type        = string
  default     = null

  validation {
    condition     = var.role_template_path == null || try(fileexists(var.role_template_path), false)
    error_message = "The role template path must name an existing file, or be null."
  }
}

variable "s3_access_log_bucket" {
  description = "Existing bucket that receives the template bucket's server access logs; null for none."
  type        = string
  default     = null

  validation {
    condition     = var.s3_access_log_bucket == null || can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.s3_access_log_bucket))
    error_message = "The log bucket must be an S3 bucket name, or null."
  }
}

variable "alb_access_log_bucket" {
  description = "Existing bucket (with the Elastic Load Balancing delivery policy) that receives the load balancer's access logs; null for none."
  type        = string
  default     = null

  validation {
    condition     = var.alb_access_log_bucket == null || can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.alb_access_log_bucket))
    error_message = "The log bucket must be an S3 bucket name, or null."
  }
}

variable "web_acl_arn" {
  description = "WAFv2 web ACL to associate with the load balancer; null for none. Its rules must allow ingest bodies (OpenLineage events) of several hundred KB."
  type        = string
  default     = null

  validation {
    condition     = var.web_acl_arn == null || can(regex("^arn:aws[a-z-]*:wafv2:[a-z0-9-]+:[0-9]{12}:regional/webacl/.+$", var.web_acl_arn))
    error_message = "The web ACL ARN must be a regional WAFv2 web ACL ARN, or null."
  }
}

variable "proxy_image" {
  description = "Envoy image of the web task's proxy (mirror it into ECR, e.g. through a pull-through cache, to avoid Docker Hub's pull limits)."
  type        = string
  default     = "envoyproxy/envoy:v1.33.2"

  validation {
    condition     = can(regex("^[a-z0-9./_-]+(:[A-Za-z0-9_.-]+)?(@sha256:[0-9a-f]{64})?$", var.proxy_image)) && !endswith(var.proxy_image, ":latest")
    error_message = "The proxy image must be an image reference with a pinned tag or digest (not :latest)."
  }
}

variable "collector_image" {
  description = "AWS Distro for OpenTelemetry collector image of the metrics service."
  type        = string
  default     = "public.ecr.aws/aws-observability/aws-otel-collector:v0.43.1"

  validation {
    condition     = can(regex("^[a-z0-9./_-]+(:[A-Za-z0-9_.-]+)?(@sha256:[0-9a-f]{64})?$", var.collector_image)) && !endswith(var.collector_image, ":latest")
    error_message = "The collector image must be an image reference with a pinned tag or digest (not :latest)."
  }
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
