// Package sdktest drives router/sqsapi with the official AWS SDK for Go v2
// (github.com/aws/aws-sdk-go-v2/service/sqs) over loopback: a module of its own, so that the
// library's module gains no dependency on the SDK. Its broker checks SigV4 signatures
// (Config.Credentials): the clients sign with static credentials, as an application's
// would, and the tests refuse wrong secrets, unknown keys, tampered and stale requests
// (signed by the SDK's own signer), and show the SDK's clock skew correction at work. Its
// queues live in a MemQueueStore: "orders" is created through the API at its start, and
// TestQueueManagement creates, lists, configures, tags, purges and deletes others; TestFIFOQueue
// a FIFO queue (its topic ordered through sqsapi.TopicConfig), whose groups come in order and
// stay held while in flight, and whose resends are deduplicated. It holds tests only, which take a few
// seconds of real time (visibility timeouts of 1 s; a real client cannot run on a fake
// clock); CI runs them:
//
//	cd router/sqsapi/sdktest && go test ./...
//
// The TestServer tests build cmd/sqsd (go build, a few seconds with a warm cache) and run
// it as a user would, over a data directory, stopped with SIGTERM or killed with SIGKILL and
// started again: queues, attributes and unacked messages survive a restart and deleted
// messages do not come back (TestServerRestart); a kill in the middle of sends and deletes
// loses no message whose send succeeded and delivers none whose delete succeeded again
// (TestServerKill9); a message received maxReceiveCount times lands in its dead-letter
// queue with its attributes and a move task brings it back (TestServerRedrive); boto3's
// query protocol (TestServerBoto3Query, as TestBoto3Query below, with the dead-letter move);
// and three processes in cluster mode, the SDK creating, sending, receiving, deleting,
// counting and purging through different nodes, a FIFO queue's groups in order
// (TestServerCluster).
//
// TestBoto3Query drives the handler with boto3 over SQS's query protocol
// (testdata/boto3_query.py, a FIFO queue's sends and receives among them), which botocore spoke before 1.31: Debian's python3-boto3 1.26,
// say. It is skipped when the Python it finds has no boto3 of that protocol. Debian's
// packages can be unpacked without installing them:
//
//	apt-get download python3-boto3 python3-botocore python3-s3transfer python3-urllib3 \
//		python3-six python3-dateutil python3-jmespath
//	for f in *.deb; do dpkg -x $f /tmp/boto3-query; done
//	SQSAPI_BOTO3_PATH=/tmp/boto3-query/usr/lib/python3/dist-packages go test -run Boto3 ./...
//
// (SQSAPI_PYTHON names the Python, python3 when unset.)
//
// TestServerAWSCLI drives cmd/sqsd with the AWS CLI (create-queue, send-message with typed
// attributes, receive-message, get-queue-attributes, delete-message, purge-queue, ..., a
// FIFO queue's groups and deduplication, delayed messages, a message's and a queue's): the
// aws command on PATH, or Debian's awscli 2.9, whose own botocore speaks the query protocol,
// unpacked with its Python dependencies (compiled for Debian's Python 3.11) into the
// directory SQSAPI_AWSCLI_ROOT names; boto3's directory above serves, as they share packages:
//
//	apt-get download awscli python3-awscrt python3-colorama python3-cryptography \
//		python3-cffi-backend python3-distro python3-docutils python3-roman \
//		python3-prompt-toolkit python3-wcwidth python3-ruamel.yaml python3-ruamel.yaml.clib \
//		python3-pyasn1
//	for f in awscli*.deb python3-*.deb; do dpkg -x $f /tmp/boto3-query; done
//	SQSAPI_AWSCLI_ROOT=/tmp/boto3-query go test -run AWSCLI ./...
//
// It is skipped when there is neither.
//
// TestJSClient drives the handler with the AWS SDK for JavaScript v3 (@aws-sdk/client-sqs,
// the JSON protocol, SigV4 from static credentials, a FIFO queue among the queues;
// testdata/jsclient/sqs_client.js), and
// TestServerJSClient cmd/sqsd, with a message redriven to its dead-letter queue and moved
// back. They need Node.js 20 or later and the SDK of testdata/jsclient/package-lock.json,
// which npm ci installs where SQSAPI_JS_DIR says (the directory's node_modules), or into
// testdata/jsclient itself; without node or the SDK they are skipped, unless SQSAPI_JS_DIR
// is set:
//
//	mkdir /tmp/jsclient && cp testdata/jsclient/package*.json /tmp/jsclient && (cd /tmp/jsclient && npm ci)
//	SQSAPI_JS_DIR=/tmp/jsclient/node_modules go test -run JSClient ./...
package sdktest
