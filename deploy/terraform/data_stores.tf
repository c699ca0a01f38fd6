# PostgreSQL (the source of truth) and Redis (the RQ queues; nothing the database cannot rebuild), both
# in the private subnets, reachable only from the services' security group, encrypted at rest with the
# deployment's key and in transit (TLS enforced by the server).

locals {
  postgres_major = split(".", var.database.engine_version)[0]
}

resource "aws_db_subnet_group" "this" {
  name       = var.name
  subnet_ids = module.network.private_subnet_ids
  tags       = local.tags
}

resource "aws_db_parameter_group" "this" {
  # A prefix, not a name: a major version upgrade creates the new family's group before dropping the old.
  name_prefix = "${var.name}-postgres${local.postgres_major}-"
  family      = "postgres${local.postgres_major}"
  tags        = local.tags

  parameter {
    name  = "rds.force_ssl"
    value = "1"
  }

  # Statements slower than a second, and every schema change, reach the postgresql log export.
  parameter {
    name  = "log_min_duration_statement"
    value = "1000"
  }

  parameter {
    name  = "log_statement"
    value = "ddl"
  }

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_iam_role" "rds_monitoring" {
  name               = "${var.name}-rds-monitoring"
  assume_role_policy = module.policies.rds_monitoring_trust_policy_json
  tags               = local.tags
}

resource "aws_iam_role_policy_attachment" "rds_monitoring" {
  role       = aws_iam_role.rds_monitoring.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/service-role/AmazonRDSEnhancedMonitoringRole"
}

resource "aws_db_instance" "this" {
  #checkov:skip=CKV_AWS_133:Backups are on: backup_retention_period is var.database.backup_retention_days, validated to 7-35 days (default 14); checkov does not evaluate optional() attribute defaults through a module call.
  identifier     = var.name
  engine         = "postgres"
  engine_version = var.database.engine_version
  instance_class = var.database.instance_class

  db_name  = "openlineage"
  username = "openlineage"
  # Write-only: the password is in no plan or state (secrets.tf). Raising the version sets a new one.
  password_wo         = ephemeral.random_password.database.result
  password_wo_version = var.secret_versions.database_password

  allocated_storage     = var.database.allocated_storage
  max_allocated_storage = var.database.max_allocated_storage
  storage_type          = "gp3"
  storage_encrypted     = true
  kms_key_id            = aws_kms_key.this.arn

  multi_az               = true
  db_subnet_group_name   = aws_db_subnet_group.this.name
  vpc_security_group_ids = [aws_security_group.database.id]
  publicly_accessible    = false
  parameter_group_name   = aws_db_parameter_group.this.name

  backup_retention_period   = var.database.backup_retention_days
  backup_window             = "03:00-03:30" # after the nightly retries of 02:00 UTC are queued
  maintenance_window        = "sun:04:00-sun:04:30"
  copy_tags_to_snapshot     = true
  deletion_protection       = var.deletion_protection
  skip_final_snapshot       = false
  final_snapshot_identifier = "${var.name}-final"

  auto_minor_version_upgrade          = true
  allow_major_version_upgrade         = false
  iam_database_authentication_enabled = true
  apply_immediately                   = false

  enabled_cloudwatch_logs_exports       = ["postgresql", "upgrade"]
  performance_insights_enabled          = true
  performance_insights_kms_key_id       = aws_kms_key.this.arn
  performance_insights_retention_period = 7
  monitoring_interval                   = 60
  monitoring_role_arn                   = aws_iam_role.rds_monitoring.arn

  tags = local.tags
}

resource "aws_elasticache_subnet_group" "this" {
  name       = var.name
  subnet_ids = module.network.private_subnet_ids
  tags       = local.tags
}

# RQ's queues must never lose a key to eviction: a full Redis refuses writes (an alarm says so first)
# rather than dropping queued jobs.
resource "aws_elasticache_parameter_group" "this" {
  name   = "${var.name}-redis7"
  family = "redis7"
  tags   = local.tags

  parameter {
    name  = "maxmemory-policy"
    value = "noeviction"
  }
}

resource "aws_elasticache_replication_group" "this" {
  #checkov:skip=CKV_AWS_31:Transit encryption is required and the AUTH token is set, through the write-only auth_token_wo (kept out of state); checkov reads only the older auth_token argument.
  replication_group_id = var.name
  description          = "RQ queues of ${var.name}"
  engine               = "redis"
  engine_version       = var.redis.engine_version
  node_type            = var.redis.node_type
  num_cache_clusters   = var.redis.node_count
  port                 = 6379
  parameter_group_name = aws_elasticache_parameter_group.this.name
  subnet_group_name    = aws_elasticache_subnet_group.this.name
  security_group_ids   = [aws_security_group.redis.id]

  automatic_failover_enabled = true
  multi_az_enabled           = true

  at_rest_encryption_enabled = true
  kms_key_id                 = aws_kms_key.this.arn
  transit_encryption_enabled = true
  transit_encryption_mode    = "required"
  # Write-only: the AUTH token is in no plan or state (secrets.tf). ROTATE keeps the previous token
  # valid while the services restart with the new REDIS_URL.
  auth_token_wo              = ephemeral.random_password.redis.result
  auth_token_wo_version      = var.secret_versions.redis_auth_token
  auth_token_update_strategy = "ROTATE"

  snapshot_retention_limit   = 1
  snapshot_window            = "04:30-05:30"
  maintenance_window         = "sun:05:30-sun:06:30"
  auto_minor_version_upgrade = true
  apply_immediately          = false

  tags = local.tags
}
