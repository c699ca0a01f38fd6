output "ecs_tasks_trust_policy_json" {
  description = "Trust policy of the task and execution roles: ECS tasks of this account and Region."
  value       = jsonencode(local.ecs_tasks_trust_policy)
}

output "assume_customer_roles_policy_json" {
  description = "The web and worker task roles' only policy: sts:AssumeRole on customer roles."
  value       = jsonencode(local.assume_customer_roles_policy)
}

output "execution_policy_json" {
  description = "The task execution role's policy: pull the image, write logs, read the injected secrets."
  value       = jsonencode(local.execution_policy)
}

output "collector_policy_json" {
  description = "The metrics collector's task role policy: write to its one log group."
  value       = jsonencode(local.collector_policy)
}

output "flow_logs_trust_policy_json" {
  description = "Trust policy of the VPC flow logs delivery role."
  value       = jsonencode(local.flow_logs_trust_policy)
}

output "flow_logs_policy_json" {
  description = "The VPC flow logs delivery role's policy: write to the flow log group."
  value       = jsonencode(local.flow_logs_policy)
}

output "rds_monitoring_trust_policy_json" {
  description = "Trust policy of the RDS enhanced monitoring role."
  value       = jsonencode(local.rds_monitoring_trust_policy)
}

output "template_bucket_policy_json" {
  description = "Bucket policy of the template bucket: public GetObject under the template prefix only, TLS only."
  value       = jsonencode(local.template_bucket_policy)
}

output "kms_key_policy_json" {
  description = "Key policy of the deployment's customer-managed KMS key."
  value       = jsonencode(local.kms_key_policy)
}
