# The product itself, on AWS: the Procfile's three processes as ECS services on Fargate from one image,
# PostgreSQL (RDS, Multi-AZ) and Redis (ElastiCache, automatic failover) in private subnets, secrets in
# Secrets Manager, the public bucket of the quick-create template, and the alarms an operator needs.
# This is the VENDOR side; the customer's role is the separate module in terraform/ at the repo root.

data "aws_partition" "current" {}

data "aws_caller_identity" "current" {}

data "aws_region" "current" {}

# The zones are named, never "whatever is available": subnets, the database and Redis must stay in
# the same zones for the deployment's life, whatever zones AWS adds.
data "aws_availability_zones" "selected" {
  state = "available"

  filter {
    name   = "zone-name"
    values = local.zone_names
  }

  lifecycle {
    postcondition {
      condition     = length(self.names) == length(local.zone_names)
      error_message = "Not every zone of availability_zones is available in this account and Region: choose others."
    }
  }
}

locals {
  partition  = data.aws_partition.current.partition
  account_id = data.aws_caller_identity.current.account_id
  region     = data.aws_region.current.region
  zone_names = coalesce(var.availability_zones, ["${data.aws_region.current.region}a", "${data.aws_region.current.region}b"])

  service_image_tag = coalesce(var.service_image_tag, var.image_tag)
  migration_image   = "${aws_ecr_repository.product.repository_url}:${var.image_tag}"
  service_image     = "${aws_ecr_repository.product.repository_url}:${local.service_image_tag}"

  template_bucket_name  = coalesce(var.template_bucket_name, "${var.name}-templates-${local.account_id}-${local.region}")
  role_template_path    = coalesce(var.role_template_path, "${path.module}/../../cfn_templates/openlineage-export-role.yaml")
  cfn_template_base_url = "https://${local.template_bucket_name}.s3.${local.region}.amazonaws.com/${var.template_prefix}/"

  metrics_namespace = "OpenLineageExport"

  tags = merge(var.tags, { "openlineage-export:deployment" = var.name })
}

module "network" {
  source = "./modules/network"

  name               = var.name
  cidr_block         = var.vpc_cidr
  availability_zones = sort(data.aws_availability_zones.selected.names)
  nat_gateway_count  = var.nat_gateway_count
  flow_log_group_arn = aws_cloudwatch_log_group.flow_logs.arn
  flow_log_role_arn  = aws_iam_role.flow_logs.arn
  tags               = local.tags
}

# Every IAM, bucket and key policy of the deployment, computed by a provider-free submodule so the
# tests render them with a real Terraform offline (tests/test_deploy_policies.py).
module "policies" {
  source = "./modules/policies"

  partition  = local.partition
  region     = local.region
  account_id = local.account_id
  execution = {
    repository_arn = aws_ecr_repository.product.arn
    log_group_arns = [for group in aws_cloudwatch_log_group.containers : group.arn]
    secret_arns    = [for secret in aws_secretsmanager_secret.this : secret.arn]
    kms_key_arn    = aws_kms_key.this.arn
  }
  metrics_log_group_arn = aws_cloudwatch_log_group.metrics.arn
  flow_log_group_arn    = aws_cloudwatch_log_group.flow_logs.arn
  template_bucket = {
    name   = local.template_bucket_name
    prefix = var.template_prefix
  }
}

# What the product's containers receive: exactly the README's configuration table (the tests compare
# the two), plus the proxy's and the collector's configuration.
module "settings" {
  source = "./modules/settings"

  vendor_aws_account_id = local.account_id
  aws_region            = local.region
  export_queue          = var.export_queue
  web_concurrency       = var.web.concurrency
  web_threads           = var.web.threads
  secret_arns           = { for key, secret in aws_secretsmanager_secret.this : key => secret.arn }
  cfn_template_base_url = local.cfn_template_base_url
  deployment            = var.name
  metrics = {
    host             = var.domain_name
    interval_seconds = 60
    namespace        = local.metrics_namespace
    log_group_name   = aws_cloudwatch_log_group.metrics.name
  }
}

# -- encryption key -----------------------------------------------------------------------------------

resource "aws_kms_key" "this" {
  description             = "${var.name}: secrets, logs, database, Redis, image repository and alarm topic."
  enable_key_rotation     = true
  deletion_window_in_days = 30
  policy                  = module.policies.kms_key_policy_json
  tags                    = local.tags
}

resource "aws_kms_alias" "this" {
  name          = "alias/${var.name}"
  target_key_id = aws_kms_key.this.key_id
}

# -- logs ---------------------------------------------------------------------------------------------

resource "aws_cloudwatch_log_group" "containers" {
  for_each = toset(["web", "proxy", "worker", "scheduler", "migrate", "collector"])

  name              = "/${var.name}/${each.key}"
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.this.arn
  tags              = local.tags
}

# The collector's embedded-metric-format records: CloudWatch turns them into the metrics alarms read.
resource "aws_cloudwatch_log_group" "metrics" {
  name              = "/${var.name}/metrics"
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.this.arn
  tags              = local.tags
}

resource "aws_cloudwatch_log_group" "flow_logs" {
  name              = "/${var.name}/vpc-flow-logs"
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.this.arn
  tags              = local.tags
}

# -- image repository ---------------------------------------------------------------------------------

resource "aws_ecr_repository" "product" {
  name                 = var.name
  image_tag_mutability = "IMMUTABLE" # a tag names one build: what was migrated is what runs

  image_scanning_configuration {
    scan_on_push = true
  }

  encryption_configuration {
    encryption_type = "KMS"
    kms_key         = aws_kms_key.this.arn
  }

  tags = local.tags
}

resource "aws_ecr_lifecycle_policy" "product" {
  repository = aws_ecr_repository.product.name
  policy = jsonencode({
    rules = [
      {
        rulePriority = 1
        description  = "Keep the 50 newest images (a rollback needs the previous ones)."
        selection    = { tagStatus = "any", countType = "imageCountMoreThan", countNumber = 50 }
        action       = { type = "expire" }
      },
    ]
  })
}
