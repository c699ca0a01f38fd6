terraform {
  # No providers: this module only computes JSON documents, so a plain `terraform init` and
  # `terraform apply` evaluate it offline (that is how the product's tests check the policies).
  required_version = ">= 1.0"
}
