// Command strand-compat runs Strand's client compatibility matrix: it
// builds and starts an agent, runs every client against it (franz-go's
// kgo suite, kcat, kafka-python, confluent-kafka-python, kafkajs,
// burrow), prints the matrix and writes it as JSON. It exits 1 when a
// cell of a capability Strand implements fails (compat.Implemented),
// 2 when the run itself broke. scripts/compat runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/strandkafka/strand/compat"
)

func main() {
	var (
		opts    compat.Options
		clients string
		caps    string
		jsonOut string
		verbose bool
	)
	flag.BoolVar(&opts.Quick, "quick", false, "the quick subset that go test runs (TestQuickMatrix)")
	flag.StringVar(&clients, "clients", "", "comma-separated rows to run ("+strings.Join(compat.ClientNames, ",")+"); default all")
	flag.StringVar(&caps, "caps", "", "comma-separated capabilities the script clients check; default all")
	flag.IntVar(&opts.Records, "records", 0, "records per client check (default 1000, 200 with -quick)")
	flag.DurationVar(&opts.StepTimeout, "step-timeout", 0, "bound on each step of a client check (default 60s)")
	flag.StringVar(&opts.KgoRun, "kgo-run", "", "regexp selecting kgo tests, as go test -run (default all)")
	flag.IntVar(&opts.KgoRecords, "kgo-records", 0, "KGO_TEST_RECORDS (default 20000, 2000 with -quick)")
	flag.DurationVar(&opts.KgoTimeout, "kgo-timeout", 0, "bound on each kgo test process (default 10m)")
	flag.StringVar(&opts.AgentBinary, "agent", "", "strand binary to test (default: go build ./cmd/strand)")
	flag.StringVar(&jsonOut, "json", "", "write the matrix as JSON here (default: a file in the temp dir)")
	flag.BoolVar(&verbose, "v", true, "log progress to stderr")
	flag.Parse()
	if clients != "" {
		opts.Clients = strings.Split(clients, ",")
	}
	if caps != "" {
		for _, c := range strings.Split(caps, ",") {
			opts.Caps = append(opts.Caps, compat.Capability(c))
		}
	}
	if verbose {
		opts.Logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
		}
	}
	if jsonOut == "" {
		jsonOut = filepath.Join(os.TempDir(), "strand-compat-"+time.Now().Format("20060102-150405")+".json")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m, err := compat.RunMatrix(ctx, opts)
	if m != nil {
		m.WriteTable(os.Stdout)
		f, ferr := os.Create(jsonOut)
		if ferr == nil {
			ferr = m.WriteJSON(f)
			if cerr := f.Close(); ferr == nil {
				ferr = cerr
			}
		}
		if ferr != nil {
			fmt.Fprintln(os.Stderr, "strand-compat: writing JSON:", ferr)
		} else {
			fmt.Printf("\nJSON: %s\n", jsonOut)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "strand-compat:", err)
		os.Exit(2)
	}
	if regs := m.Regressions(); len(regs) > 0 {
		fmt.Fprintf(os.Stderr, "strand-compat: %d failing cells of implemented capabilities:\n  %s\n", len(regs), strings.Join(regs, "\n  "))
		os.Exit(1)
	}
}
