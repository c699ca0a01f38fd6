# Roles. The documents come from modules/policies (rendered and checked offline by the tests); here
# they become managed policies (aws_iam_policy) attached to the roles.
#
# - execution: ECS pulls the image, writes logs, reads the injected secrets. Never the code's own role.
# - web and worker task roles: the vendor principal that customer roles trust. sts:AssumeRole and
#   nothing else: every S3 call of an export or of Save's write check is made as the customer's role.
# - collector task role: writes metric records to its one log group.
# - scheduler and migration tasks: no task role at all (they make no AWS call).

resource "aws_iam_role" "execution" {
  name               = "${var.name}-execution"
  description        = "ECS task execution role of ${var.name}: image pull, logs, injected secrets."
  assume_role_policy = module.policies.ecs_tasks_trust_policy_json
  tags               = local.tags
}

resource "aws_iam_policy" "execution" {
  name        = "${var.name}-execution"
  description = "Pull the product image, write container logs, read the secrets ECS injects."
  policy      = module.policies.execution_policy_json
  tags        = local.tags
}

resource "aws_iam_role_policy_attachment" "execution" {
  role       = aws_iam_role.execution.name
  policy_arn = aws_iam_policy.execution.arn
}

resource "aws_iam_policy" "assume_customer_roles" {
  name        = "${var.name}-assume-customer-roles"
  description = "sts:AssumeRole on customers' export roles; nothing else."
  policy      = module.policies.assume_customer_roles_policy_json
  tags        = local.tags
}

resource "aws_iam_role" "worker" {
  name               = "${var.name}-worker"
  description        = "Task role of the ${var.name} workers: assumes customers' export roles."
  assume_role_policy = module.policies.ecs_tasks_trust_policy_json
  tags               = local.tags
}

resource "aws_iam_role_policy_attachment" "worker" {
  role       = aws_iam_role.worker.name
  policy_arn = aws_iam_policy.assume_customer_roles.arn
}

resource "aws_iam_role" "web" {
  name               = "${var.name}-web"
  description        = "Task role of the ${var.name} portal: Save's write check assumes customers' export roles."
  assume_role_policy = module.policies.ecs_tasks_trust_policy_json
  tags               = local.tags
}

resource "aws_iam_role_policy_attachment" "web" {
  role       = aws_iam_role.web.name
  policy_arn = aws_iam_policy.assume_customer_roles.arn
}

resource "aws_iam_role" "collector" {
  name               = "${var.name}-collector"
  description        = "Task role of the ${var.name} metrics collector: writes metric records."
  assume_role_policy = module.policies.ecs_tasks_trust_policy_json
  tags               = local.tags
}

resource "aws_iam_policy" "collector" {
  name        = "${var.name}-collector"
  description = "Write embedded-metric-format records to the ${var.name} metrics log group."
  policy      = module.policies.collector_policy_json
  tags        = local.tags
}

resource "aws_iam_role_policy_attachment" "collector" {
  role       = aws_iam_role.collector.name
  policy_arn = aws_iam_policy.collector.arn
}

resource "aws_iam_role" "flow_logs" {
  name               = "${var.name}-flow-logs"
  description        = "Delivers the ${var.name} VPC's flow logs."
  assume_role_policy = module.policies.flow_logs_trust_policy_json
  tags               = local.tags
}

resource "aws_iam_policy" "flow_logs" {
  name        = "${var.name}-flow-logs"
  description = "Write the ${var.name} VPC's flow logs to their log group."
  policy      = module.policies.flow_logs_policy_json
  tags        = local.tags
}

resource "aws_iam_role_policy_attachment" "flow_logs" {
  role       = aws_iam_role.flow_logs.name
  policy_arn = aws_iam_policy.flow_logs.arn
}
