module narad.dev/consume/router/sqsapi/sqsbench

go 1.26.0

replace narad.dev/consume => ../../..

require (
	github.com/aws/aws-sdk-go-v2 v1.22.1
	github.com/aws/aws-sdk-go-v2/service/sqs v1.26.0
	narad.dev/consume v0.0.0-00010101000000-000000000000
)

require (
	github.com/Admiral-Piett/goaws v0.4.5 // indirect
	github.com/aws/aws-sdk-go-v2/internal/configsources v1.2.1 // indirect
	github.com/aws/aws-sdk-go-v2/internal/endpoints/v2 v2.5.1 // indirect
	github.com/aws/smithy-go v1.16.0 // indirect
	github.com/ghodss/yaml v1.0.0 // indirect
	github.com/gorilla/mux v1.8.0 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/sirupsen/logrus v1.9.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
)

tool github.com/Admiral-Piett/goaws/app/cmd
