output "vpc_id" {
  description = "ID of the VPC."
  value       = aws_vpc.this.id
}

output "public_subnet_ids" {
  description = "Public subnets (load balancer, NAT gateways), one per availability zone."
  value       = aws_subnet.public[*].id
}

output "private_subnet_ids" {
  description = "Private subnets (tasks, database, Redis), one per availability zone."
  value       = aws_subnet.private[*].id
}

output "nat_public_ips" {
  description = "Public addresses the tasks' outbound traffic leaves from (customers may allow-list them)."
  value       = aws_eip.nat[*].public_ip
}
