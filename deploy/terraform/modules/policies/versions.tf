terraform {
  # No providers: this module only computes JSON documents, so a plain `terraform init` and
  # `terraform apply` evaluate it offline. That is how the product's tests check every IAM, bucket
  # and key policy the deploy module grants (tests/test_deploy_policies.py).
  required_version = ">= 1.3"
}
