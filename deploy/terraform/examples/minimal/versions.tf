terraform {
  required_version = ">= 1.11"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 6.0"
    }
    random = {
      source  = "hashicorp/random"
      version = ">= 3.7"
    }
  }

  # Keep the state in a versioned, encrypted bucket of the vendor account, for example:
  # backend "s3" {
  #   bucket       = "acme-terraform-state"
  #   key          = "openlineage-export/prod.tfstate"
  #   region       = "us-east-1"
  #   use_lockfile = true
  #   encrypt      = true
  # }
}
