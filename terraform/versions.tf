terraform {
  # 1.2 brings lifecycle preconditions, used to refuse creating the role in the wrong account.
  required_version = ">= 1.2"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 4.0"
    }
  }
}
