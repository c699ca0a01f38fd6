variable "name" {
  description = "Name prefix of every resource."
  type        = string
}

variable "cidr_block" {
  description = "The VPC's IPv4 range; split into one public and one private subnet per availability zone."
  type        = string

  validation {
    condition     = can(cidrnetmask(var.cidr_block)) && tonumber(split("/", var.cidr_block)[1]) <= 20
    error_message = "The VPC CIDR block must be an IPv4 range of /20 or larger, such as 10.40.0.0/16."
  }
}

variable "availability_zones" {
  description = "Availability zones to spread the subnets over (2 or 3)."
  type        = list(string)

  validation {
    condition     = length(var.availability_zones) >= 2 && length(var.availability_zones) <= 3
    error_message = "Give 2 or 3 availability zones: Multi-AZ RDS and ElastiCache failover need at least 2."
  }
}

variable "nat_gateway_count" {
  description = "NAT gateways for the private subnets' outbound traffic: 1 (cheaper) or one per availability zone."
  type        = number

  validation {
    condition     = var.nat_gateway_count >= 1 && var.nat_gateway_count <= 3 && floor(var.nat_gateway_count) == var.nat_gateway_count
    error_message = "The NAT gateway count must be 1, 2 or 3."
  }
}

variable "flow_log_group_arn" {
  description = "CloudWatch log group that receives the VPC's flow logs."
  type        = string
}

variable "flow_log_role_arn" {
  description = "IAM role VPC flow logs deliver with."
  type        = string
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
