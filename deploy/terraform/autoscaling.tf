# Workers scale on the export queue's backlog per running worker (jobs waiting in <EXPORT_QUEUE>, as
# /metrics reports olx_queue_depth, divided by the worker tasks running); web tasks scale on CPU.
#
# Scaling in stops a worker with SIGTERM: RQ finishes the job in hand within the task's stop timeout
# (120 s); a longer export is interrupted and the tick closes it as failed once its lease expires, and
# it is retried the next night. The long scale-in cooldown keeps that rare.

resource "aws_appautoscaling_target" "worker" {
  service_namespace  = "ecs"
  resource_id        = "service/${aws_ecs_cluster.this.name}/${aws_ecs_service.worker.name}"
  scalable_dimension = "ecs:service:DesiredCount"
  min_capacity       = var.worker.min_count
  max_capacity       = var.worker.max_count
}

resource "aws_appautoscaling_policy" "worker_backlog" {
  name               = "${var.name}-worker-backlog"
  policy_type        = "TargetTrackingScaling"
  service_namespace  = aws_appautoscaling_target.worker.service_namespace
  resource_id        = aws_appautoscaling_target.worker.resource_id
  scalable_dimension = aws_appautoscaling_target.worker.scalable_dimension

  target_tracking_scaling_policy_configuration {
    target_value       = var.worker.backlog_per_task
    scale_out_cooldown = 60
    scale_in_cooldown  = 900

    customized_metric_specification {
      metrics {
        id          = "depth"
        label       = "Export jobs waiting"
        return_data = false

        metric_stat {
          stat = "Maximum"

          metric {
            namespace   = local.metrics_namespace
            metric_name = "olx_queue_depth"

            dimensions {
              name  = "Deployment"
              value = var.name
            }

            dimensions {
              name  = "queue"
              value = var.export_queue
            }
          }
        }
      }

      metrics {
        id          = "workers"
        label       = "Worker tasks running"
        return_data = false

        metric_stat {
          stat = "Average"

          metric {
            namespace   = "ECS/ContainerInsights"
            metric_name = "RunningTaskCount"

            dimensions {
              name  = "ClusterName"
              value = aws_ecs_cluster.this.name
            }

            dimensions {
              name  = "ServiceName"
              value = aws_ecs_service.worker.name
            }
          }
        }
      }

      metrics {
        id          = "backlog"
        label       = "Export jobs waiting per worker task"
        expression  = "depth / IF(workers > 0, workers, 1)"
        return_data = true
      }
    }
  }
}

resource "aws_appautoscaling_target" "web" {
  service_namespace  = "ecs"
  resource_id        = "service/${aws_ecs_cluster.this.name}/${aws_ecs_service.web.name}"
  scalable_dimension = "ecs:service:DesiredCount"
  min_capacity       = var.web.count
  max_capacity       = var.web.max_count
}

resource "aws_appautoscaling_policy" "web_cpu" {
  name               = "${var.name}-web-cpu"
  policy_type        = "TargetTrackingScaling"
  service_namespace  = aws_appautoscaling_target.web.service_namespace
  resource_id        = aws_appautoscaling_target.web.resource_id
  scalable_dimension = aws_appautoscaling_target.web.scalable_dimension

  target_tracking_scaling_policy_configuration {
    target_value       = 60
    scale_out_cooldown = 60
    scale_in_cooldown  = 300

    predefined_metric_specification {
      predefined_metric_type = "ECSServiceAverageCPUUtilization"
    }
  }
}
