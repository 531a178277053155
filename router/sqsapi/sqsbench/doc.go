// Package sqsbench sets cmd/sqsd beside GoAWS (github.com/Admiral-Piett/goaws, an SQS clone
// in Go that keeps its queues in memory) and drives both with the same client, the AWS SDK
// for Go v2, in one run: BenchmarkServers. It is a module of its own, so that neither the
// library's module nor router/sqsapi/sdktest gains GoAWS or an old SDK as a dependency.
//
// GoAWS 0.4.5 speaks SQS's query protocol only (form bodies, XML answers), which the SDK's
// service/sqs spoke until v1.28.0 (then the JSON protocol): the module pins service/sqs
// v1.26.0, the last it could take that speaks query, and cmd/sqsd serves both protocols. So
// both servers get the same requests from the same client code.
//
// Each server is a process of its own, built here with go build (GoAWS through the module's
// tool directive), started over loopback: cmd/sqsd as its README starts it (a data directory,
// signatures checked, 4 partitions a queue, every send fsynced) and with -fsync=false, and
// GoAWS with its defaults (a config file naming a free port). Reported, per message: the
// server's CPU time (/proc/<pid>/stat, Linux only), the whole CPU time (the server's and this
// process's, the SDK's clients included) and messages per second (the wall time of the
// whole workload). BENCHMARKS.md's figures come from
//
//	cd router/sqsapi/sqsbench && go test -run '^$' -bench . -benchtime 20000x -count 3
//
// and CI runs one message a case (-benchtime 1x), to show that it still runs. GOAWS_STDERR
// names a file GoAWS's standard error is appended to (/dev/null when unset).
// SQSBENCH_BASELINE names the root of another checkout of the module (an older commit's
// worktree, say): its cmd/sqsd runs too, as sqsd-baseline and sqsd-baseline-nofsync, each
// just before the case it is the baseline of. -count repeats each case in a row, so
// interleave before and after with runs of -count 1:
//
//	git worktree add /tmp/sqs-before <commit>
//	for i in 1 2 3; do SQSBENCH_BASELINE=/tmp/sqs-before go test -run '^$' -bench . -benchtime 20000x -count 1; done
package sqsbench
