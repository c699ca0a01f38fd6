# The Procfile's processes as ECS services on Fargate, all from the one product image, each running
# the wheel's entry point for its Procfile line:
#
#   web        openlineage-export-web        2+ tasks behind the load balancer, scaled on CPU
#   worker     openlineage-export-worker     scaled on the export queue's depth (autoscaling.tf)
#   scheduler  openlineage-export-scheduler  two tasks: one active by rq-scheduler's lock, one standby
#
# plus the migration task definition (flask db upgrade, run once before new tasks start:
# deploy/scripts/upgrade) and the metrics collector service.

locals {
  proxy_port  = 8080
  portal_port = 8000

  # Settings every product container receives: the README's configuration table (modules/settings).
  product_container = {
    essential              = true
    readonlyRootFilesystem = true
    environment            = module.settings.environment
    secrets                = module.settings.secrets
    # tini-like init as PID 1: reaps the work horses RQ forks, forwards SIGTERM.
    linuxParameters = { initProcessEnabled = true }
    # gunicorn's worker heartbeat files and Python's temporary files; the image is read-only.
    mountPoints = [{ sourceVolume = "tmp", containerPath = "/tmp", readOnly = false }]
  }

  log_options = {
    for key, group in aws_cloudwatch_log_group.containers : key => {
      logDriver = "awslogs"
      options = {
        "awslogs-group"         = group.name
        "awslogs-region"        = local.region
        "awslogs-stream-prefix" = key
      }
    }
  }

  containers = {
    web = [
      merge(local.product_container, {
        name             = "web"
        image            = local.service_image
        command          = ["openlineage-export-web"]
        logConfiguration = local.log_options["web"]
        stopTimeout      = 30
      }),
      {
        name                   = "proxy"
        image                  = var.proxy_image
        essential              = true
        readonlyRootFilesystem = true
        command                = ["--config-yaml", module.settings.proxy_config_json, "--disable-hot-restart", "--log-level", "warn"]
        portMappings           = [{ containerPort = local.proxy_port, protocol = "tcp" }]
        logConfiguration       = local.log_options["proxy"]
        dependsOn              = [{ containerName = "web", condition = "START" }]
      },
    ]
    worker = [
      merge(local.product_container, {
        name             = "worker"
        image            = local.service_image
        command          = ["openlineage-export-worker"]
        logConfiguration = local.log_options["worker"]
        # RQ finishes the job in hand on SIGTERM (warm shutdown); Fargate allows at most 120 s.
        stopTimeout = 120
        # The worker's heartbeat: a task whose worker is neither busy nor heartbeating while jobs wait
        # is unhealthy, and ECS replaces it.
        healthCheck = {
          command     = ["CMD", "openlineage-export-healthcheck"]
          interval    = 60
          timeout     = 15
          retries     = 3
          startPeriod = 120
        }
      }),
    ]
    scheduler = [
      merge(local.product_container, {
        name             = "scheduler"
        image            = local.service_image
        command          = ["openlineage-export-scheduler"]
        logConfiguration = local.log_options["scheduler"]
        stopTimeout      = 30
      }),
    ]
    migrate = [
      merge(local.product_container, {
        name             = "migrate"
        image            = local.migration_image
        command          = ["flask", "--app", "portal", "db", "upgrade"]
        logConfiguration = local.log_options["migrate"]
      }),
    ]
  }

  task_sizes = {
    web       = { cpu = var.web.cpu, memory = var.web.memory }
    worker    = { cpu = var.worker.cpu, memory = var.worker.memory }
    scheduler = { cpu = var.scheduler.cpu, memory = var.scheduler.memory }
    migrate   = { cpu = 256, memory = 512 }
  }

  # null: the task has no role and so no AWS credentials.
  task_roles = {
    web       = aws_iam_role.web.arn
    worker    = aws_iam_role.worker.arn
    scheduler = null
    migrate   = null
  }
}

resource "aws_ecs_cluster" "this" {
  name = var.name

  # Per-service task counts (the worker scaling and the worker alarm read RunningTaskCount).
  setting {
    name  = "containerInsights"
    value = "enabled"
  }

  tags = local.tags
}

resource "aws_ecs_cluster_capacity_providers" "this" {
  cluster_name       = aws_ecs_cluster.this.name
  capacity_providers = ["FARGATE"]

  default_capacity_provider_strategy {
    capacity_provider = "FARGATE"
    weight            = 1
  }
}

resource "aws_ecs_task_definition" "product" {
  for_each = local.containers

  family                   = "${var.name}-${each.key}"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = local.task_sizes[each.key].cpu
  memory                   = local.task_sizes[each.key].memory
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = local.task_roles[each.key]
  container_definitions    = jsonencode(each.value)

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = var.cpu_architecture
  }

  volume {
    name = "tmp"
  }

  tags = local.tags
}

resource "aws_ecs_task_definition" "collector" {
  family                   = "${var.name}-collector"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = 256
  memory                   = 512
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = aws_iam_role.collector.arn
  container_definitions = jsonencode([
    {
      name                   = "collector"
      image                  = var.collector_image
      essential              = true
      readonlyRootFilesystem = true
      environment            = [{ name = "AOT_CONFIG_CONTENT", value = module.settings.collector_config_json }]
      # The bearer token the collector presents to /metrics, from the same secret the portal checks.
      secrets          = [{ name = "METRICS_TOKEN", valueFrom = aws_secretsmanager_secret.this["metrics_token"].arn }]
      logConfiguration = local.log_options["collector"]
      healthCheck = {
        command     = ["CMD", "/healthcheck"]
        interval    = 30
        timeout     = 5
        retries     = 3
        startPeriod = 30
      }
    },
  ])

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = var.cpu_architecture
  }

  tags = local.tags
}

resource "aws_ecs_service" "web" {
  name                              = "web"
  cluster                           = aws_ecs_cluster.this.id
  task_definition                   = aws_ecs_task_definition.product["web"].arn
  desired_count                     = var.web.count
  launch_type                       = "FARGATE"
  platform_version                  = "LATEST"
  health_check_grace_period_seconds = 60
  propagate_tags                    = "SERVICE"
  enable_ecs_managed_tags           = true

  deployment_minimum_healthy_percent = 100
  deployment_maximum_percent         = 200

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  network_configuration {
    subnets          = module.network.private_subnet_ids
    security_groups  = [aws_security_group.services.id, aws_security_group.web.id]
    assign_public_ip = false
  }

  load_balancer {
    target_group_arn = aws_lb_target_group.web.arn
    container_name   = "proxy"
    container_port   = local.proxy_port
  }

  lifecycle {
    ignore_changes = [desired_count] # owned by the CPU scaling once created
  }

  # The secrets must hold a value before the first task reads them.
  depends_on = [
    aws_lb_listener.https,
    aws_secretsmanager_secret_version.secret_key,
    aws_secretsmanager_secret_version.metrics_token,
    aws_secretsmanager_secret_version.database_url,
    aws_secretsmanager_secret_version.redis_url,
  ]
  tags = local.tags
}

resource "aws_ecs_service" "worker" {
  name                    = "worker"
  cluster                 = aws_ecs_cluster.this.id
  task_definition         = aws_ecs_task_definition.product["worker"].arn
  desired_count           = var.worker.min_count
  launch_type             = "FARGATE"
  platform_version        = "LATEST"
  propagate_tags          = "SERVICE"
  enable_ecs_managed_tags = true

  deployment_minimum_healthy_percent = 100
  deployment_maximum_percent         = 200

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  network_configuration {
    subnets          = module.network.private_subnet_ids
    security_groups  = [aws_security_group.services.id]
    assign_public_ip = false
  }

  lifecycle {
    ignore_changes = [desired_count] # owned by the queue-depth scaling once created
  }

  depends_on = [
    aws_secretsmanager_secret_version.secret_key,
    aws_secretsmanager_secret_version.metrics_token,
    aws_secretsmanager_secret_version.database_url,
    aws_secretsmanager_secret_version.redis_url,
  ]
  tags = local.tags
}

# Two schedulers: rq-scheduler's lock lets one enqueue at a time, the other takes over within its lock
# timeout if the first one dies. A deployment replaces them one at a time, never runs three.
resource "aws_ecs_service" "scheduler" {
  name                    = "scheduler"
  cluster                 = aws_ecs_cluster.this.id
  task_definition         = aws_ecs_task_definition.product["scheduler"].arn
  desired_count           = 2
  launch_type             = "FARGATE"
  platform_version        = "LATEST"
  propagate_tags          = "SERVICE"
  enable_ecs_managed_tags = true

  deployment_minimum_healthy_percent = 50
  deployment_maximum_percent         = 100

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  network_configuration {
    subnets          = module.network.private_subnet_ids
    security_groups  = [aws_security_group.services.id]
    assign_public_ip = false
  }

  depends_on = [
    aws_secretsmanager_secret_version.secret_key,
    aws_secretsmanager_secret_version.metrics_token,
    aws_secretsmanager_secret_version.database_url,
    aws_secretsmanager_secret_version.redis_url,
  ]
  tags = local.tags
}

resource "aws_ecs_service" "collector" {
  name                    = "collector"
  cluster                 = aws_ecs_cluster.this.id
  task_definition         = aws_ecs_task_definition.collector.arn
  desired_count           = 1 # one scraper: counter deltas are exact
  launch_type             = "FARGATE"
  platform_version        = "LATEST"
  propagate_tags          = "SERVICE"
  enable_ecs_managed_tags = true

  deployment_minimum_healthy_percent = 0
  deployment_maximum_percent         = 100

  network_configuration {
    subnets          = module.network.private_subnet_ids
    security_groups  = [aws_security_group.collector.id]
    assign_public_ip = false
  }

  depends_on = [
    aws_secretsmanager_secret_version.secret_key,
    aws_secretsmanager_secret_version.metrics_token,
    aws_secretsmanager_secret_version.database_url,
    aws_secretsmanager_secret_version.redis_url,
  ]
  tags = local.tags
}
