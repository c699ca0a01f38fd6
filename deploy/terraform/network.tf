# Security groups: the load balancer takes HTTPS from the allowed ranges and reaches only the web tasks'
# proxy; the services reach PostgreSQL, Redis and HTTPS (AWS APIs, customers' S3 buckets through the
# NAT gateways); PostgreSQL and Redis accept only the services. No rule allows all ports.

resource "aws_security_group" "alb" {
  name        = "${var.name}-alb"
  description = "Load balancer of the ${var.name} portal"
  vpc_id      = module.network.vpc_id
  tags        = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "alb_https" {
  for_each = toset(var.allowed_ingress_cidrs)

  security_group_id = aws_security_group.alb.id
  description       = "HTTPS to the portal and the ingest API"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = each.value
}

# The metrics collector scrapes /metrics through the load balancer from the NAT gateways' addresses,
# which must be allowed even when allowed_ingress_cidrs is narrow.
resource "aws_vpc_security_group_ingress_rule" "alb_https_from_nat" {
  count = var.nat_gateway_count

  security_group_id = aws_security_group.alb.id
  description       = "HTTPS from the deployment's own NAT gateways (metrics collector)"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = "${module.network.nat_public_ips[count.index]}/32"
}

resource "aws_vpc_security_group_egress_rule" "alb_to_web" {
  security_group_id            = aws_security_group.alb.id
  description                  = "To the web tasks' proxy"
  ip_protocol                  = "tcp"
  from_port                    = local.proxy_port
  to_port                      = local.proxy_port
  referenced_security_group_id = aws_security_group.web.id
}

# Only the web tasks carry it: the load balancer's way in.
resource "aws_security_group" "web" {
  name        = "${var.name}-web"
  description = "Web tasks of ${var.name}: the proxy port, from the load balancer only"
  vpc_id      = module.network.vpc_id
  tags        = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "web_from_alb" {
  security_group_id            = aws_security_group.web.id
  description                  = "From the load balancer to the proxy"
  ip_protocol                  = "tcp"
  from_port                    = local.proxy_port
  to_port                      = local.proxy_port
  referenced_security_group_id = aws_security_group.alb.id
}

# Every product task (web, worker, scheduler, migration): what the product talks to.
resource "aws_security_group" "services" {
  name        = "${var.name}-services"
  description = "Product tasks of ${var.name}: PostgreSQL, Redis and HTTPS out"
  vpc_id      = module.network.vpc_id
  tags        = local.tags
}

resource "aws_vpc_security_group_egress_rule" "services_to_database" {
  security_group_id            = aws_security_group.services.id
  description                  = "PostgreSQL"
  ip_protocol                  = "tcp"
  from_port                    = 5432
  to_port                      = 5432
  referenced_security_group_id = aws_security_group.database.id
}

resource "aws_vpc_security_group_egress_rule" "services_to_redis" {
  security_group_id            = aws_security_group.services.id
  description                  = "Redis"
  ip_protocol                  = "tcp"
  from_port                    = 6379
  to_port                      = 6379
  referenced_security_group_id = aws_security_group.redis.id
}

resource "aws_vpc_security_group_egress_rule" "services_https" {
  security_group_id = aws_security_group.services.id
  description       = "HTTPS: STS, Secrets Manager, ECR, CloudWatch Logs and customers' S3 buckets in any Region"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = "0.0.0.0/0"
}

resource "aws_security_group" "collector" {
  name        = "${var.name}-collector"
  description = "Metrics collector of ${var.name}: HTTPS out only"
  vpc_id      = module.network.vpc_id
  tags        = local.tags
}

resource "aws_vpc_security_group_egress_rule" "collector_https" {
  security_group_id = aws_security_group.collector.id
  description       = "HTTPS: the portal's /metrics through the load balancer, CloudWatch Logs, ECR"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = "0.0.0.0/0"
}

resource "aws_security_group" "database" {
  name        = "${var.name}-database"
  description = "PostgreSQL of ${var.name}: from the product tasks only"
  vpc_id      = module.network.vpc_id
  tags        = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "database_from_services" {
  security_group_id            = aws_security_group.database.id
  description                  = "PostgreSQL from the product tasks"
  ip_protocol                  = "tcp"
  from_port                    = 5432
  to_port                      = 5432
  referenced_security_group_id = aws_security_group.services.id
}

resource "aws_security_group" "redis" {
  name        = "${var.name}-redis"
  description = "Redis of ${var.name}: from the product tasks only"
  vpc_id      = module.network.vpc_id
  tags        = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "redis_from_services" {
  security_group_id            = aws_security_group.redis.id
  description                  = "Redis from the product tasks"
  ip_protocol                  = "tcp"
  from_port                    = 6379
  to_port                      = 6379
  referenced_security_group_id = aws_security_group.services.id
}
