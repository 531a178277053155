// Package sdktest drives router/sqsapi with the official AWS SDK for Go v2
// (github.com/aws/aws-sdk-go-v2/service/sqs) over loopback: a module of its own, so that the
// library's module gains no dependency on the SDK. It holds tests only, which take a few
// seconds of real time (visibility timeouts of 1 s; a real client cannot run on a fake
// clock); CI runs them:
//
//	cd router/sqsapi/sdktest && go test ./...
package sdktest
