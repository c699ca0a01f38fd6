# The four secrets of the README's configuration table, generated here and stored in Secrets Manager.
# Each value comes from an ephemeral random_password and reaches AWS only through write-only arguments
# (secret_string_wo, password_wo, auth_token_wo): it is in no plan, no state and no output. ECS
# injects them as environment variables at task start (task definitions hold their ARNs only).
#
# Rotation: raise the matching counter in var.secret_versions and apply; a new value is generated and
# written. The database password and the Redis AUTH token are written to the server and to the URL
# secret in the same apply. Then restart the services (docs/deploy.md, "Rotate secrets").
#
# Alphanumeric only: the database password and the AUTH token sit inside URLs without escaping.

ephemeral "random_password" "secret_key" {
  length  = 64
  special = false
}

ephemeral "random_password" "metrics_token" {
  length  = 48
  special = false
}

ephemeral "random_password" "database" {
  length  = 40
  special = false
}

ephemeral "random_password" "redis" {
  length  = 64
  special = false
}

locals {
  secret_names = {
    secret_key    = "SECRET_KEY"
    metrics_token = "METRICS_TOKEN"
    database_url  = "DATABASE_URL"
    redis_url     = "REDIS_URL"
  }
}

resource "aws_secretsmanager_secret" "this" {
  for_each = local.secret_names

  #checkov:skip=CKV2_AWS_57:Rotated by Terraform (var.secret_versions), not a rotation Lambda: the database password and the Redis token must change on the server and in the URL secret together, and the services restart to read them.
  name                    = "${var.name}/${each.value}"
  description             = "${each.value} of the ${var.name} deployment (injected by ECS)."
  kms_key_id              = aws_kms_key.this.arn
  recovery_window_in_days = 7
  tags                    = local.tags
}

resource "aws_secretsmanager_secret_version" "secret_key" {
  secret_id                = aws_secretsmanager_secret.this["secret_key"].id
  secret_string_wo         = ephemeral.random_password.secret_key.result
  secret_string_wo_version = var.secret_versions.secret_key
}

resource "aws_secretsmanager_secret_version" "metrics_token" {
  secret_id                = aws_secretsmanager_secret.this["metrics_token"].id
  secret_string_wo         = ephemeral.random_password.metrics_token.result
  secret_string_wo_version = var.secret_versions.metrics_token
}

resource "aws_secretsmanager_secret_version" "database_url" {
  secret_id = aws_secretsmanager_secret.this["database_url"].id
  # psycopg reads sslmode from the URL: the connection is TLS (the parameter group also forces it).
  secret_string_wo         = "postgresql://${aws_db_instance.this.username}:${ephemeral.random_password.database.result}@${aws_db_instance.this.address}:${aws_db_instance.this.port}/${aws_db_instance.this.db_name}?sslmode=require"
  secret_string_wo_version = var.secret_versions.database_password
}

resource "aws_secretsmanager_secret_version" "redis_url" {
  secret_id = aws_secretsmanager_secret.this["redis_url"].id
  # rediss://: TLS, as the replication group requires.
  secret_string_wo         = "rediss://:${ephemeral.random_password.redis.result}@${aws_elasticache_replication_group.this.primary_endpoint_address}:${aws_elasticache_replication_group.this.port}/0"
  secret_string_wo_version = var.secret_versions.redis_auth_token
}
