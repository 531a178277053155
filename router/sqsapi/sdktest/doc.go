// Package sdktest drives router/sqsapi with the official AWS SDK for Go v2
// (github.com/aws/aws-sdk-go-v2/service/sqs) over loopback: a module of its own, so that the
// library's module gains no dependency on the SDK. It holds tests and benchmarks only:
//
//	cd router/sqsapi/sdktest && go test ./...
//	cd router/sqsapi/sdktest && go test -run '^$' -bench . -benchtime 20000x
package sdktest
