# Every policy document the deploy module grants, as pure values (no provider), so a real Terraform
# renders them offline and the tests compare them with what the product needs and no more.

locals {
  account_root = "arn:${var.partition}:iam::${var.account_id}:root"

  # ECS tasks assume the task and execution roles; the conditions stop another account's ECS from
  # using them (confused deputy).
  ecs_tasks_trust_policy = {
    Version = "2012-10-17"
    Statement = [
      {
        Sid       = "EcsTasksOfThisAccount"
        Effect    = "Allow"
        Principal = { Service = "ecs-tasks.amazonaws.com" }
        Action    = "sts:AssumeRole"
        Condition = {
          StringEquals = { "aws:SourceAccount" = var.account_id }
          ArnLike      = { "aws:SourceArn" = "arn:${var.partition}:ecs:${var.region}:${var.account_id}:*" }
        }
      },
    ]
  }

  # The vendor principal that customer roles trust. The workers export and the portal's Save runs the
  # write check, both as the customer's role: sts:AssumeRole is all either needs. No S3, no IAM.
  # Customer roles live in any account, under any path and name, so the resource is every role.
  # Deliberately no sts:ExternalId condition here: the write check also tries to assume the role
  # WITHOUT the External ID, to refuse a customer role that would let us in without it; a condition
  # on our side would make that probe fail here, and the check would pass for a role it must refuse.
  assume_customer_roles_policy = {
    Version = "2012-10-17"
    Statement = [
      {
        Sid      = "AssumeCustomerExportRoles"
        Effect   = "Allow"
        Action   = "sts:AssumeRole"
        Resource = "arn:${var.partition}:iam::*:role/*"
      },
    ]
  }

  # The task execution role: pull the image, write the containers' logs, read the secrets that ECS
  # injects as environment variables. The running code never has these permissions.
  execution_policy = {
    Version = "2012-10-17"
    Statement = [
      {
        # GetAuthorizationToken has no resource-level permissions: "*" is the only valid resource.
        Sid      = "EcrLogin"
        Effect   = "Allow"
        Action   = "ecr:GetAuthorizationToken"
        Resource = "*"
      },
      {
        Sid      = "PullProductImage"
        Effect   = "Allow"
        Action   = ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
        Resource = var.execution.repository_arn
      },
      {
        Sid      = "WriteContainerLogs"
        Effect   = "Allow"
        Action   = ["logs:CreateLogStream", "logs:PutLogEvents"]
        Resource = [for arn in var.execution.log_group_arns : "${arn}:log-stream:*"]
      },
      {
        Sid      = "ReadInjectedSecrets"
        Effect   = "Allow"
        Action   = "secretsmanager:GetSecretValue"
        Resource = var.execution.secret_arns
      },
      {
        Sid      = "DecryptInjectedSecrets"
        Effect   = "Allow"
        Action   = "kms:Decrypt"
        Resource = var.execution.kms_key_arn
        Condition = {
          StringEquals = { "kms:ViaService" = "secretsmanager.${var.region}.amazonaws.com" }
        }
      },
    ]
  }

  # The metrics collector: writes embedded-metric-format records to its one log group, from which
  # CloudWatch extracts the metrics the alarms watch. Nothing else.
  collector_policy = {
    Version = "2012-10-17"
    Statement = [
      {
        Sid      = "WriteMetricRecords"
        Effect   = "Allow"
        Action   = ["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"]
        Resource = [var.metrics_log_group_arn, "${var.metrics_log_group_arn}:log-stream:*"]
      },
    ]
  }

  flow_logs_trust_policy = {
    Version = "2012-10-17"
    Statement = [
      {
        Sid       = "VpcFlowLogsOfThisAccount"
        Effect    = "Allow"
        Principal = { Service = "vpc-flow-logs.amazonaws.com" }
        Action    = "sts:AssumeRole"
        Condition = { StringEquals = { "aws:SourceAccount" = var.account_id } }
      },
    ]
  }

  flow_logs_policy = {
    Version = "2012-10-17"
    Statement = [
      {
        Sid      = "DeliverFlowLogs"
        Effect   = "Allow"
        Action   = ["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"]
        Resource = [var.flow_log_group_arn, "${var.flow_log_group_arn}:log-stream:*"]
      },
    ]
  }

  rds_monitoring_trust_policy = {
    Version = "2012-10-17"
    Statement = [
      {
        Sid       = "RdsEnhancedMonitoring"
        Effect    = "Allow"
        Principal = { Service = "monitoring.rds.amazonaws.com" }
        Action    = "sts:AssumeRole"
        Condition = { StringEquals = { "aws:SourceAccount" = var.account_id } }
      },
    ]
  }

  template_bucket_arn = "arn:${var.partition}:s3:::${var.template_bucket.name}"

  # The template bucket is public for exactly one thing: reading objects under the template prefix
  # (the CloudFormation console fetches the quick-create link's templateURL anonymously). No listing,
  # no other key, no write; and nothing over plain HTTP.
  template_bucket_policy = {
    Version = "2012-10-17"
    Statement = [
      {
        Sid       = "PublicReadOfRoleTemplates"
        Effect    = "Allow"
        Principal = "*"
        Action    = "s3:GetObject"
        Resource  = "${local.template_bucket_arn}/${var.template_bucket.prefix}/*"
      },
      {
        Sid       = "DenyInsecureTransport"
        Effect    = "Deny"
        Principal = "*"
        Action    = "s3:*"
        Resource  = [local.template_bucket_arn, "${local.template_bucket_arn}/*"]
        Condition = { Bool = { "aws:SecureTransport" = "false" } }
      },
    ]
  }

  # The deployment's one customer-managed key: secrets, logs, RDS, ElastiCache, ECR, SNS. The account
  # administers it through IAM (the default key policy); the services that encrypt with it on our
  # behalf without an IAM role of ours (CloudWatch Logs, CloudWatch alarms publishing to SNS) are
  # named with the narrowest condition each supports.
  kms_key_policy = {
    Version = "2012-10-17"
    Statement = [
      {
        Sid       = "AccountAdministersThroughIam"
        Effect    = "Allow"
        Principal = { AWS = local.account_root }
        Action    = "kms:*"
        Resource  = "*"
      },
      {
        Sid       = "CloudWatchLogsOfThisAccount"
        Effect    = "Allow"
        Principal = { Service = "logs.${var.region}.amazonaws.com" }
        Action    = ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*"]
        Resource  = "*"
        Condition = {
          ArnLike = {
            "kms:EncryptionContext:aws:logs:arn" = "arn:${var.partition}:logs:${var.region}:${var.account_id}:log-group:*"
          }
        }
      },
      {
        Sid       = "CloudWatchAlarmsPublishToEncryptedTopic"
        Effect    = "Allow"
        Principal = { Service = "cloudwatch.amazonaws.com" }
        Action    = ["kms:Decrypt", "kms:GenerateDataKey*"]
        Resource  = "*"
        Condition = { StringEquals = { "aws:SourceAccount" = var.account_id } }
      },
    ]
  }
}
