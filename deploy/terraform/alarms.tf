# What an operator must know, on one SNS topic (docs/deploy.md, "Alarms"). The olx_* metrics are what
# the portal's /metrics reports, scraped by the collector service (modules/settings) and published in
# the OpenLineageExport namespace with a Deployment dimension; the rest are AWS's own metrics.

resource "aws_sns_topic" "alarms" {
  name              = "${var.name}-alarms"
  kms_master_key_id = aws_kms_key.this.arn
  tags              = local.tags
}

resource "aws_sns_topic_subscription" "alarm_email" {
  for_each = toset(var.alarm_emails)

  topic_arn = aws_sns_topic.alarms.arn
  protocol  = "email"
  endpoint  = each.value
}

locals {
  alarm_actions = [aws_sns_topic.alarms.arn]
}

# The schedule's tick records its time in the database every 5 minutes; three missed ticks mean the
# schedulers are down, Redis lost the schedule, or no worker takes the schedule queue. No data at all
# (the collector cannot scrape /metrics) is an alarm too: then nothing else is known either.
resource "aws_cloudwatch_metric_alarm" "tick_late" {
  alarm_name          = "${var.name}-tick-late"
  alarm_description   = "The export schedule's tick has not run for 15 minutes (olx_last_tick_age_seconds), or /metrics cannot be scraped. See docs/deploy.md, Alarms."
  namespace           = local.metrics_namespace
  metric_name         = "olx_last_tick_age_seconds"
  dimensions          = { Deployment = var.name }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 900
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}

resource "aws_cloudwatch_metric_alarm" "export_failures" {
  alarm_name          = "${var.name}-export-failures"
  alarm_description   = "Export runs failed in the last 5 minutes (olx_export_runs_total{status=failed} rose). /ops/ lists the connectors, worst first."
  namespace           = local.metrics_namespace
  metric_name         = "olx_export_runs_total"
  dimensions          = { Deployment = var.name, status = "failed" }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  tags                = local.tags
}

resource "aws_cloudwatch_metric_alarm" "queue_depth" {
  alarm_name          = "${var.name}-export-queue-depth"
  alarm_description   = "More than ${var.alarm_thresholds.queue_depth} export jobs have waited in ${var.export_queue} for 15 minutes: workers are at their maximum or not taking jobs."
  namespace           = local.metrics_namespace
  metric_name         = "olx_queue_depth"
  dimensions          = { Deployment = var.name, queue = var.export_queue }
  statistic           = "Minimum"
  period              = 300
  evaluation_periods  = 3
  threshold           = var.alarm_thresholds.queue_depth
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}

resource "aws_cloudwatch_metric_alarm" "redis_down" {
  alarm_name          = "${var.name}-redis-down"
  alarm_description   = "The portal could not reach Redis when /metrics was scraped (olx_redis_up = 0) for 10 minutes: no job is queued or taken."
  namespace           = local.metrics_namespace
  metric_name         = "olx_redis_up"
  dimensions          = { Deployment = var.name }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 2
  threshold           = 1
  comparison_operator = "LessThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}

# A worker's container health check is its heartbeat (openlineage-export-healthcheck): a worker that is
# neither busy nor heartbeating while jobs wait fails it, and ECS replaces the task. Fewer running
# workers than desired for 15 minutes means workers keep failing it (or cannot start).
resource "aws_cloudwatch_metric_alarm" "workers_unhealthy" {
  alarm_name          = "${var.name}-workers-without-heartbeat"
  alarm_description   = "Fewer worker tasks running than desired for 15 minutes: workers fail their heartbeat health check or cannot start. See the worker log group."
  evaluation_periods  = 3
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags

  metric_query {
    id          = "missing"
    label       = "Worker tasks desired but not running"
    expression  = "desired - running"
    return_data = true
  }

  metric_query {
    id = "desired"

    metric {
      namespace   = "ECS/ContainerInsights"
      metric_name = "DesiredTaskCount"
      dimensions  = { ClusterName = aws_ecs_cluster.this.name, ServiceName = aws_ecs_service.worker.name }
      stat        = "Minimum"
      period      = 300
    }
  }

  metric_query {
    id = "running"

    metric {
      namespace   = "ECS/ContainerInsights"
      metric_name = "RunningTaskCount"
      dimensions  = { ClusterName = aws_ecs_cluster.this.name, ServiceName = aws_ecs_service.worker.name }
      stat        = "Minimum"
      period      = 300
    }
  }
}

resource "aws_cloudwatch_metric_alarm" "web_5xx_rate" {
  alarm_name          = "${var.name}-web-5xx-rate"
  alarm_description   = "More than ${var.alarm_thresholds.web_5xx_pct}% of portal and ingest requests answered 5xx (from the tasks or the load balancer) for 10 minutes."
  evaluation_periods  = 2
  threshold           = var.alarm_thresholds.web_5xx_pct
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags

  metric_query {
    id          = "rate"
    label       = "5xx responses, percent of requests"
    expression  = "IF(requests > 0, 100 * (FILL(target5xx, 0) + FILL(lb5xx, 0)) / requests, 0)"
    return_data = true
  }

  metric_query {
    id = "requests"

    metric {
      namespace   = "AWS/ApplicationELB"
      metric_name = "RequestCount"
      dimensions  = { LoadBalancer = aws_lb.web.arn_suffix }
      stat        = "Sum"
      period      = 300
    }
  }

  metric_query {
    id = "target5xx"

    metric {
      namespace   = "AWS/ApplicationELB"
      metric_name = "HTTPCode_Target_5XX_Count"
      dimensions  = { LoadBalancer = aws_lb.web.arn_suffix }
      stat        = "Sum"
      period      = 300
    }
  }

  metric_query {
    id = "lb5xx"

    metric {
      namespace   = "AWS/ApplicationELB"
      metric_name = "HTTPCode_ELB_5XX_Count"
      dimensions  = { LoadBalancer = aws_lb.web.arn_suffix }
      stat        = "Sum"
      period      = 300
    }
  }
}

resource "aws_cloudwatch_metric_alarm" "web_unhealthy" {
  alarm_name          = "${var.name}-web-no-healthy-task"
  alarm_description   = "No web task has passed /healthz for 2 minutes: the portal and the ingest API are down (/healthz answers 503 naming the database or Redis when one does not answer)."
  namespace           = "AWS/ApplicationELB"
  metric_name         = "HealthyHostCount"
  dimensions          = { LoadBalancer = aws_lb.web.arn_suffix, TargetGroup = aws_lb_target_group.web.arn_suffix }
  statistic           = "Minimum"
  period              = 60
  evaluation_periods  = 2
  threshold           = 1
  comparison_operator = "LessThanThreshold"
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}

resource "aws_cloudwatch_metric_alarm" "database_storage" {
  alarm_name          = "${var.name}-database-storage-low"
  alarm_description   = "PostgreSQL has less than 10% of its maximum storage free: raise database.max_allocated_storage."
  namespace           = "AWS/RDS"
  metric_name         = "FreeStorageSpace"
  dimensions          = { DBInstanceIdentifier = aws_db_instance.this.identifier }
  statistic           = "Minimum"
  period              = 300
  evaluation_periods  = 2
  threshold           = var.database.max_allocated_storage * 0.1 * 1024 * 1024 * 1024
  comparison_operator = "LessThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}

# Redis refuses writes when full (noeviction): queue and schedule writes would fail.
resource "aws_cloudwatch_metric_alarm" "redis_memory" {
  count = var.redis.node_count

  alarm_name          = "${var.name}-redis-memory-${count.index + 1}"
  alarm_description   = "Redis node ${count.index + 1} uses over 80% of its memory; at 100% it refuses new jobs. Look for a pile of jobs in /admin/rq/, or raise redis.node_type."
  namespace           = "AWS/ElastiCache"
  metric_name         = "DatabaseMemoryUsagePercentage"
  dimensions          = { CacheClusterId = format("%s-%03d", aws_elasticache_replication_group.this.id, count.index + 1) }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 2
  threshold           = 80
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}
