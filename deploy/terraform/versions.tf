terraform {
  # 1.11: ephemeral resources and write-only arguments, so the generated secrets (database password,
  # Redis AUTH token, SECRET_KEY, METRICS_TOKEN) never enter the plan or the state.
  required_version = ">= 1.11"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 6.0: the write-only arguments password_wo, auth_token_wo and secret_string_wo, and
      # data.aws_region's `region` attribute.
      version = ">= 6.0"
    }
    random = {
      source = "hashicorp/random"
      # 3.7: the ephemeral random_password.
      version = ">= 3.7"
    }
  }
}
