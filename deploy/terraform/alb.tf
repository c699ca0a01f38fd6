# The portal's way in: HTTPS only (TLS 1.2+ policy), to the web tasks' proxy, health-checked on /healthz
# (200 when the database and Redis answer, 503 naming the one that does not).

resource "aws_lb" "web" {
  #checkov:skip=CKV2_AWS_28:A web ACL is optional (var.web_acl_arn): AWS's managed common rule set blocks request bodies over 8 KB, and OpenLineage events posted to the ingest API are larger; the portal authenticates every route itself.
  #checkov:skip=CKV2_AWS_76:The web ACL, when one is associated, is the operator's (var.web_acl_arn); its rule groups, Log4j's included, are chosen with it.
  #checkov:skip=CKV_AWS_91:Access logs go to an existing bucket with the Elastic Load Balancing delivery policy (var.alb_access_log_bucket); that bucket's principal differs by Region, so the module does not create it.
  name                       = "${var.name}-web"
  internal                   = false
  load_balancer_type         = "application"
  subnets                    = module.network.public_subnet_ids
  security_groups            = [aws_security_group.alb.id]
  drop_invalid_header_fields = true
  enable_deletion_protection = var.deletion_protection
  idle_timeout               = 300 # as long as the proxy's request timeout: large ingest posts, exports of the CLI

  access_logs {
    bucket  = coalesce(var.alb_access_log_bucket, "unused")
    enabled = var.alb_access_log_bucket != null
  }

  tags = local.tags
}

resource "aws_lb_target_group" "web" {
  #checkov:skip=CKV_AWS_378:TLS ends at the load balancer; the hop to the proxy stays inside the VPC, to a port only the load balancer's security group may reach.
  name                 = "${var.name}-web"
  port                 = local.proxy_port
  protocol             = "HTTP"
  target_type          = "ip"
  vpc_id               = module.network.vpc_id
  deregistration_delay = 30

  health_check {
    path                = "/healthz"
    matcher             = "200"
    interval            = 15
    timeout             = 5
    healthy_threshold   = 2
    unhealthy_threshold = 3
  }

  tags = local.tags
}

resource "aws_lb_listener" "https" {
  load_balancer_arn = aws_lb.web.arn
  port              = 443
  protocol          = "HTTPS"
  ssl_policy        = "ELBSecurityPolicy-TLS13-1-2-2021-06"
  certificate_arn   = var.certificate_arn

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.web.arn
  }

  tags = local.tags
}

resource "aws_wafv2_web_acl_association" "web" {
  count = var.web_acl_arn == null ? 0 : 1

  resource_arn = aws_lb.web.arn
  web_acl_arn  = var.web_acl_arn
}

resource "aws_route53_record" "web" {
  count = var.route53_zone_id == null ? 0 : 1

  zone_id = var.route53_zone_id
  name    = var.domain_name
  type    = "A"

  alias {
    name                   = aws_lb.web.dns_name
    zone_id                = aws_lb.web.zone_id
    evaluate_target_health = true
  }
}
