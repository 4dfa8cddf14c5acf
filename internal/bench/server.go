package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"
)

// The bench measures a server's CPU per GB moved, so the server must not
// share its process with the load generator: --embedded and
// --compare-kfake start it as a child process of the same binary, through
// the hidden subcommand below, and read its CPU from /proc.

// ServerCommandName is the hidden subcommand the bench re-executes its
// own binary with. A test binary of a package that runs the bench
// dispatches it from TestMain (see RunServerCommandIfChild).
const ServerCommandName = "bench-server"

// serverSpec is what the child is told to run, passed as JSON in one
// argument: the fields embeddedConfig reads, so the child's agent is
// configured exactly as the in-process one was.
type serverSpec struct {
	// Kind is "strand" (an agent) or "kfake" (one kfake broker).
	Kind string `json:"kind"`
	Dir  string `json:"dir"`
	// KfakeMemory keeps kfake in memory instead of on disk with an fsync
	// per batch.
	KfakeMemory          bool          `json:"kfake_memory,omitempty"`
	ObjStoreLatency      string        `json:"objstore_latency,omitempty"`
	FlushInterval        time.Duration `json:"flush_interval,omitempty"`
	FlushBytes           int           `json:"flush_bytes,omitempty"`
	HedgePercentile      float64       `json:"hedge_percentile,omitempty"`
	HedgeMaxRatio        float64       `json:"hedge_max_ratio,omitempty"`
	MaxPutsPerSec        float64       `json:"max_puts_per_sec,omitempty"`
	FetchReadAheadBytes  int64         `json:"fetch_read_ahead_bytes,omitempty"`
	FetchMaxParallelGets int           `json:"fetch_max_parallel_gets,omitempty"`
	ExpressZones         int           `json:"express_zones,omitempty"`
	SQLViewStepSlots     int           `json:"sql_view_step_slots,omitempty"`
	// CPUProfile, if set, is a file the child writes its CPU profile of
	// its whole life to (for go tool pprof).
	CPUProfile string `json:"cpu_profile,omitempty"`
}

// serverAddrs is the child's one line on stdout once it listens, or
// why it could not start.
type serverAddrs struct {
	Kafka string `json:"kafka,omitempty"`
	HTTP  string `json:"http,omitempty"`
	Error string `json:"error,omitempty"`
}

func specOf(o *Options, kind, dir string) serverSpec {
	return serverSpec{
		Kind: kind, Dir: dir, KfakeMemory: o.KfakeMemory,
		ObjStoreLatency: o.ObjStoreLatency, FlushInterval: o.FlushInterval, FlushBytes: o.FlushBytes,
		HedgePercentile: o.HedgePercentile, HedgeMaxRatio: o.HedgeMaxRatio, MaxPutsPerSec: o.MaxPutsPerSec,
		FetchReadAheadBytes: o.FetchReadAheadBytes, FetchMaxParallelGets: o.FetchMaxParallelGets,
		ExpressZones: o.ExpressZones, SQLViewStepSlots: o.SQLViewStepSlots,
		CPUProfile: o.ServerCPUProfile,
	}
}

// options are the Options embeddedConfig reads, as the parent had them:
// specOf's inverse.
func (spec serverSpec) options() Options {
	return Options{
		ObjStoreLatency: spec.ObjStoreLatency, FlushInterval: spec.FlushInterval, FlushBytes: spec.FlushBytes,
		HedgePercentile: spec.HedgePercentile, HedgeMaxRatio: spec.HedgeMaxRatio, MaxPutsPerSec: spec.MaxPutsPerSec,
		FetchReadAheadBytes: spec.FetchReadAheadBytes, FetchMaxParallelGets: spec.FetchMaxParallelGets,
		ExpressZones: spec.ExpressZones, SQLViewStepSlots: spec.SQLViewStepSlots,
	}
}

// NewServerCommand returns the hidden `strand bench-server SPEC`: it
// starts the server SPEC describes, prints its addresses as one JSON line
// and runs until its stdin closes (the bench ends it, or died).
func NewServerCommand() *cobra.Command {
	serves.Store(true)
	return &cobra.Command{
		Use:    ServerCommandName + " SPEC",
		Short:  "Run the server a strand bench measures, in a process of its own (internal)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var spec serverSpec
			if err := json.Unmarshal([]byte(args[0]), &spec); err != nil {
				return fmt.Errorf("%s: spec: %w", ServerCommandName, err)
			}
			return runServer(cmd.Context(), spec, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
}

// RunServerCommandIfChild runs the server and exits if this process was
// started as the bench's child (os.Args[1] is ServerCommandName). A test
// binary whose tests run the bench calls it first in TestMain.
func RunServerCommandIfChild() {
	serves.Store(true)
	if len(os.Args) < 2 || os.Args[1] != ServerCommandName {
		return
	}
	cmd := NewServerCommand()
	cmd.SetArgs(os.Args[2:])
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runServer(ctx context.Context, spec serverSpec, stdin io.Reader, stdout, stderr io.Writer) error {
	err := serve(ctx, spec, stdin, stdout, stderr)
	var se startError
	if errors.As(err, &se) {
		// The parent reads stdout for the addresses: tell it why there
		// are none.
		line, _ := json.Marshal(serverAddrs{Error: se.err.Error()})
		fmt.Fprintf(stdout, "%s\n", line)
		return se.err
	}
	return err
}

// startError is an error of serve before the server listens.
type startError struct{ err error }

func (e startError) Error() string { return e.err.Error() }

func serve(ctx context.Context, spec serverSpec, stdin io.Reader, stdout, stderr io.Writer) error {
	if spec.CPUProfile != "" {
		stop, err := startCPUProfile(filepath.Dir(spec.CPUProfile), filepath.Base(spec.CPUProfile))
		if err != nil {
			return startError{err}
		}
		defer stop()
	}
	var addrs serverAddrs
	var stop func()
	switch spec.Kind {
	case "kfake":
		opts := []kfake.Opt{kfake.NumBrokers(1), kfake.AllowAutoTopicCreation()}
		if !spec.KfakeMemory {
			if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
				return startError{err}
			}
			opts = append(opts, kfake.DataDir(spec.Dir), kfake.SyncWrites())
		}
		c, err := kfake.NewCluster(opts...)
		if err != nil {
			return startError{fmt.Errorf("bench: kfake: %w", err)}
		}
		stop = c.Close
		addrs.Kafka = c.ListenAddrs()[0]
	case "strand":
		o := spec.options()
		a, err := startEmbedded(ctx, &o, spec.Dir, stderr)
		if err != nil {
			return startError{err}
		}
		stop = func() {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := a.Stop(sctx); err != nil {
				slog.New(slog.NewTextHandler(stderr, nil)).Warn("stopping the agent", "err", err)
			}
		}
		addrs.Kafka, addrs.HTTP = a.KafkaAddr(), a.HTTPAddr()
	default:
		return startError{fmt.Errorf("%s: unknown kind %q", ServerCommandName, spec.Kind)}
	}
	defer stop()
	line, err := json.Marshal(addrs)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		return err
	}
	// Run until the parent closes stdin, or the context ends: a bench
	// killed hard closes the pipe too, so no server outlives it.
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stdin)
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}

// childServer is a server the bench started as a child process.
type childServer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addrs serverAddrs
}

// serverExecutable is the binary a child server runs: this one.
var serverExecutable = os.Executable

// serves is set when this binary runs ServerCommandName (main registered
// NewServerCommand, or a TestMain called RunServerCommandIfChild): any
// other binary, re-executed, would do something else entirely (a test
// binary would run its tests).
var serves atomic.Bool

// startChildServer starts spec in a child process of this binary and
// waits for its addresses.
func startChildServer(ctx context.Context, spec serverSpec, stderr io.Writer) (*childServer, error) {
	if !serves.Load() {
		return nil, fmt.Errorf("bench: this binary does not run %s; run the bench in process (InProcess)", ServerCommandName)
	}
	exe, err := serverExecutable()
	if err != nil {
		return nil, fmt.Errorf("bench: finding this binary to start the %s server: %w", spec.Kind, err)
	}
	arg, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	// Not CommandContext: the server is stopped by closing its stdin,
	// so it shuts down cleanly even when ctx is cancelled.
	cmd := exec.Command(exe, ServerCommandName, string(arg))
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting the %s server: %w", spec.Kind, err)
	}
	c := &childServer{cmd: cmd, stdin: stdin}
	type lineOrErr struct {
		line []byte
		err  error
	}
	got := make(chan lineOrErr, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadBytes('\n')
		got <- lineOrErr{line, err}
		io.Copy(io.Discard, stdout) // nothing more is expected; never block the child
	}()
	select {
	case r := <-got:
		if r.err == nil {
			r.err = json.Unmarshal(r.line, &c.addrs)
		}
		if r.err == nil && c.addrs.Error != "" {
			c.kill()
			return nil, errors.New(c.addrs.Error)
		}
		if r.err != nil {
			c.kill()
			return nil, fmt.Errorf("bench: the %s server did not start: %w", spec.Kind, r.err)
		}
	case <-time.After(setupTimeout):
		c.kill()
		return nil, fmt.Errorf("bench: the %s server did not start within %v", spec.Kind, setupTimeout)
	case <-ctx.Done():
		c.kill()
		return nil, ctx.Err()
	}
	return c, nil
}

func (c *childServer) kill() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// stop asks the server to end (closes its stdin) and waits for it, for
// at most timeout before killing it.
func (c *childServer) stop(timeout time.Duration) error {
	c.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		c.cmd.Process.Kill()
		<-done
		return fmt.Errorf("bench: the server did not stop within %v; killed", timeout)
	}
}

// cpuSeconds is the child's user plus system CPU so far.
func (c *childServer) cpuSeconds() (float64, error) {
	return procCPUSeconds(c.cmd.Process.Pid)
}

// clockTicksPerSec is the unit of /proc/<pid>/stat's utime and stime:
// USER_HZ, 100 on every Linux architecture Go supports (sysconf is out
// of reach without cgo).
const clockTicksPerSec = 100

// procCPUSeconds reads a process's user plus system CPU, all its threads,
// from /proc/<pid>/stat.
func procCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseProcStatCPU(b)
}

// parseProcStatCPU takes utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line. The command name (field 2) is in parentheses and
// may hold spaces or parentheses, so fields are counted after its last ')'.
func parseProcStatCPU(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("bench: /proc stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, errors.New("bench: /proc stat: too few fields")
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bench: /proc stat utime: %w", err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bench: /proc stat stime: %w", err)
	}
	return float64(utime+stime) / clockTicksPerSec, nil
}
