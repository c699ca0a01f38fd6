# Nothing secret is output: secrets are referred to by ARN only, their values are in no state at all.

output "portal_url" {
  description = "The portal's address (point domain_name at load_balancer_dns_name when route53_zone_id is null)."
  value       = "https://${var.domain_name}/"
}

output "load_balancer_dns_name" {
  description = "DNS name of the load balancer, for a CNAME or alias record of domain_name."
  value       = aws_lb.web.dns_name
}

output "vendor_aws_account_id" {
  description = "The account the services run in: the value of VENDOR_AWS_ACCOUNT_ID, the only principal customer roles trust."
  value       = local.account_id
}

output "worker_role_arn" {
  description = "Task role of the workers (sts:AssumeRole only): the principal that assumes customers' roles for exports."
  value       = aws_iam_role.worker.arn
}

output "web_role_arn" {
  description = "Task role of the portal (sts:AssumeRole only): the principal of Save's write check."
  value       = aws_iam_role.web.arn
}

output "nat_public_ips" {
  description = "Addresses the services' outbound traffic leaves from: what customers allow-list in an aws:SourceIp condition, if they use one."
  value       = module.network.nat_public_ips
}

output "ecr_repository_url" {
  description = "Repository to push the product image to (docker push <url>:<image_tag>)."
  value       = aws_ecr_repository.product.repository_url
}

output "cfn_template_base_url" {
  description = "HTTPS folder of the public CloudFormation template: the services' CFN_TEMPLATE_BASE_URL."
  value       = local.cfn_template_base_url
}

output "role_template_url" {
  description = "Public URL of the CloudFormation role template (the quick-create link's templateURL)."
  value       = "${local.cfn_template_base_url}openlineage-export-role.yaml"
}

output "cluster_name" {
  description = "Name of the ECS cluster."
  value       = aws_ecs_cluster.this.name
}

output "service_names" {
  description = "The ECS services, by Procfile process (and the metrics collector)."
  value = {
    web       = aws_ecs_service.web.name
    worker    = aws_ecs_service.worker.name
    scheduler = aws_ecs_service.scheduler.name
    collector = aws_ecs_service.collector.name
  }
}

output "migration" {
  description = "What `aws ecs run-task` needs to run the migration (flask db upgrade) once before new tasks start (deploy/scripts/upgrade reads it)."
  value = {
    cluster         = aws_ecs_cluster.this.name
    task_definition = aws_ecs_task_definition.product["migrate"].arn
    subnets         = module.network.private_subnet_ids
    security_groups = [aws_security_group.services.id]
  }
}

output "secret_arns" {
  description = "ARNs (not values) of the Secrets Manager secrets, by the variable ECS injects them as."
  value       = { for key, name in local.secret_names : name => aws_secretsmanager_secret.this[key].arn }
}

output "database_endpoint" {
  description = "Host name and port of the PostgreSQL instance (reachable from the services only)."
  value       = "${aws_db_instance.this.address}:${aws_db_instance.this.port}"
}

output "redis_endpoint" {
  description = "Primary endpoint of the Redis replication group (TLS; reachable from the services only)."
  value       = "${aws_elasticache_replication_group.this.primary_endpoint_address}:${aws_elasticache_replication_group.this.port}"
}

output "alarm_topic_arn" {
  description = "SNS topic every alarm notifies; subscribe a pager or chat integration to it."
  value       = aws_sns_topic.alarms.arn
}

output "template_bucket_name" {
  description = "Name of the public, versioned bucket that serves the role template."
  value       = aws_s3_bucket.templates.id
}
