# What the product's containers receive, and the configuration of the two helper containers: the web
# task's proxy and the metrics collector. Pure values, so a real Terraform renders them offline.

locals {
  # The README's configuration table, one variable each. Every process receives the same settings
  # (the README: "every process reads the same environment variables at start").
  # AWS_ENDPOINT_URL is deliberately absent: unset means real AWS (the local demo's moto server sets it).
  environment = {
    VENDOR_AWS_ACCOUNT_ID           = var.vendor_aws_account_id
    AWS_REGION                      = var.aws_region
    REQUIRE_EXTERNAL_ID_ENFORCEMENT = "true"
    LOCAL_MODE                      = "false"
    EXPORT_QUEUE                    = var.export_queue
    PORTAL_PORT                     = tostring(var.portal_port)
    WEB_CONCURRENCY                 = tostring(var.web_concurrency)
    WEB_THREADS                     = tostring(var.web_threads)
    CFN_TEMPLATE_BASE_URL           = var.cfn_template_base_url
  }

  # Injected by ECS from Secrets Manager at task start; never in a task definition or in state.
  secrets = {
    SECRET_KEY    = var.secret_arns.secret_key
    DATABASE_URL  = var.secret_arns.database_url
    REDIS_URL     = var.secret_arns.redis_url
    METRICS_TOKEN = var.secret_arns.metrics_token
  }

  # The metrics the alarms and the worker scaling read, as the collector publishes them: name and
  # the labels kept as dimensions (besides Deployment).
  metric_dimensions = {
    olx_export_runs_total     = ["status"]
    olx_queue_depth           = ["queue"]
    olx_connectors            = ["status"]
    olx_redis_up              = []
    olx_last_tick_age_seconds = []
  }

  # The web entry point binds gunicorn to 127.0.0.1 (as the Procfile's web line does), which the load
  # balancer cannot reach; this proxy, in the same task (one network namespace), listens on the
  # task's address and forwards to it. Envoy's bootstrap, passed with --config-yaml (JSON is YAML).
  proxy_config = {
    admin = {} # no admin listener
    static_resources = {
      listeners = [
        {
          name    = "portal"
          address = { socket_address = { address = "0.0.0.0", port_value = var.proxy_port } }
          filter_chains = [
            {
              filters = [
                {
                  name = "envoy.filters.network.http_connection_manager"
                  typed_config = {
                    "@type"            = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
                    stat_prefix        = "portal"
                    use_remote_address = false
                    # The load balancer in front appends the client's address; keep it as sent.
                    xff_num_trusted_hops = 1
                    request_timeout      = "300s"
                    route_config = {
                      virtual_hosts = [
                        {
                          name    = "portal"
                          domains = ["*"]
                          routes = [
                            { match = { prefix = "/" }, route = { cluster = "portal", timeout = "300s" } },
                          ]
                        },
                      ]
                    }
                    http_filters = [
                      {
                        name         = "envoy.filters.http.router"
                        typed_config = { "@type" = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" }
                      },
                    ]
                  }
                },
              ]
            },
          ]
        },
      ]
      clusters = [
        {
          name            = "portal"
          type            = "STATIC"
          connect_timeout = "2s"
          load_assignment = {
            cluster_name = "portal"
            endpoints = [
              {
                lb_endpoints = [
                  { endpoint = { address = { socket_address = { address = "127.0.0.1", port_value = var.portal_port } } } },
                ]
              },
            ]
          }
        },
      ]
    }
  }

  # The AWS Distro for OpenTelemetry collector: scrapes /metrics through the load balancer (the figures
  # come from the database, so any web task gives the same answer, and one scraper keeps counter deltas
  # exact), and writes the metrics the alarms need as embedded-metric-format records to one log group.
  # "$${env:METRICS_TOKEN}" is the collector's own environment lookup, not a Terraform interpolation.
  collector_config = {
    extensions = { health_check = {} }
    receivers = {
      prometheus = {
        config = {
          scrape_configs = [
            {
              job_name        = "portal"
              scheme          = "https"
              metrics_path    = "/metrics"
              scrape_interval = "${var.metrics.interval_seconds}s"
              scrape_timeout  = "${min(var.metrics.interval_seconds, 30) - 1}s"
              authorization   = { type = "Bearer", credentials = "$${env:METRICS_TOKEN}" }
              static_configs  = [{ targets = ["${var.metrics.host}:443"] }]
              relabel_configs = [{ target_label = "Deployment", replacement = var.deployment }]
            },
          ]
        }
      }
    }
    processors = { batch = { timeout = "10s" } }
    exporters = {
      awsemf = {
        namespace               = var.metrics.namespace
        log_group_name          = var.metrics.log_group_name
        log_stream_name         = "collector"
        region                  = var.aws_region
        dimension_rollup_option = "NoDimensionRollup"
        metric_declarations = [
          for name, labels in local.metric_dimensions : {
            dimensions            = [concat(["Deployment"], labels)]
            metric_name_selectors = ["^${name}$"]
          }
        ]
      }
    }
    service = {
      extensions = ["health_check"]
      pipelines = {
        metrics = { receivers = ["prometheus"], processors = ["batch"], exporters = ["awsemf"] }
      }
    }
  }
}
