module github.com/manifoldflow/manifold/tools/ec2types

go 1.26.0

require (
	github.com/aws/aws-sdk-go-v2/service/ec2 v1.350.0
	github.com/google/go-cmp v0.7.0
)

require github.com/aws/smithy-go v1.28.9 // indirect
