output "environment" {
  description = "The product containers' plain environment, as an ECS container definition's environment list."
  value       = [for name in sort(keys(local.environment)) : { name = name, value = local.environment[name] }]
}

output "secrets" {
  description = "The product containers' secrets, as an ECS container definition's secrets list (ARNs, not values)."
  value       = [for name in sort(keys(local.secrets)) : { name = name, valueFrom = local.secrets[name] }]
}

output "variable_names" {
  description = "Every variable name the product containers receive, plain and secret, sorted."
  value       = sort(concat(keys(local.environment), keys(local.secrets)))
}

output "proxy_config_json" {
  description = "Envoy bootstrap of the web task's proxy (load balancer to gunicorn on loopback), as JSON."
  value       = jsonencode(local.proxy_config)
}

output "collector_config_json" {
  description = "Configuration of the metrics collector (AWS Distro for OpenTelemetry), as JSON."
  value       = jsonencode(local.collector_config)
}

output "metric_dimensions" {
  description = "The metrics the collector publishes, by name, with the labels kept as dimensions besides Deployment."
  value       = local.metric_dimensions
}
