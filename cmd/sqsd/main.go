package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// config is what the flags set.
type config struct {
	dir         string // the data directory
	addr        string // to listen on
	baseURL     string // how clients reach the server; empty: from addr and TLS
	tlsCert     string
	tlsKey      string
	credentials string // a credentials file; empty: dir/credentials, generated when absent
	noAuth      bool   // check no signature
	region      string
	partitions  int  // of a new queue
	fsync       bool // fsync every append

	ready func(url string) // tests: told the URL once the server serves
	now   func() time.Time // tests: the front end's clock (nil: time.Now)
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("sqsd", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&cfg.dir, "dir", "data", "data directory: the queues, their messages and their consumers' state")
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:9324", "address to listen on (host:port; port 0 picks a free one)")
	fs.StringVar(&cfg.baseURL, "url", "", "the server's URL as clients reach it, the base of queue URLs (default: http[s]://<addr>)")
	fs.StringVar(&cfg.tlsCert, "tls-cert", "", "TLS certificate file (PEM), with -tls-key: serve HTTPS")
	fs.StringVar(&cfg.tlsKey, "tls-key", "", "TLS private key file (PEM), with -tls-cert")
	fs.StringVar(&cfg.credentials, "credentials", "", "credentials file: one \"ACCESS_KEY_ID SECRET_ACCESS_KEY\" a line (# comments);\n"+
		"every request's SigV4 signature is checked against it (default: <dir>/credentials, a pair generated\n"+
		"and printed at the first start)")
	fs.BoolVar(&cfg.noAuth, "no-auth", false, "check NO signature: anyone who reaches the server may call every action")
	fs.StringVar(&cfg.region, "region", "", "the one region signatures may name (default: any), and QueueArn's (default: us-east-1)")
	fs.IntVar(&cfg.partitions, "partitions", 4, "partitions of a new queue's topic")
	fs.BoolVar(&cfg.fsync, "fsync", true, "fsync every message sent before answering (false: a crash of the machine may lose\n"+
		"the last second of messages; the server fsyncs each second)")
	fs.Usage = func() {
		fmt.Fprintf(errOut, "usage: sqsd [flags]\n\nAn SQS-compatible, durable queue server; see the package documentation.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case cfg.dir == "":
		return cfg, errors.New("-dir is required")
	case (cfg.tlsCert == "") != (cfg.tlsKey == ""):
		return cfg, errors.New("-tls-cert and -tls-key go together")
	case cfg.noAuth && cfg.credentials != "":
		return cfg, errors.New("-no-auth and -credentials exclude each other")
	case cfg.partitions < 1 || cfg.partitions > 1024:
		return cfg, errors.New("-partitions must lie within 1 and 1024")
	}
	return cfg, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sqsd:", err)
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, logger, os.Stdout); err != nil {
		logger.Error("sqsd: stopped", "err", err)
		os.Exit(1)
	}
}
