package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// kcatErrorWait bounds how long a kcat consumer may take to report a
// partition error; librdkafka reports one on the first fetch that gets
// it, well under a second.
const kcatErrorWait = 20 * time.Second

// TestKcatDamagedObjects is the first and fifth reproductions
// with the real binary and kcat (librdkafka, which does not check CRCs
// by default): records are produced, the agent is killed, one value byte
// of a stored record is flipped in one topic's data object and another
// topic's object is deleted, and the agent restarts on the same data
// dir. kcat never prints the altered value and prints the agent's
// CORRUPT_MESSAGE; on the deleted object it prints the agent's
// UNKNOWN_SERVER_ERROR rather than waiting silently (it took the
// KAFKA_STORAGE_ERROR of before for a moved leader and refreshed
// metadata forever); and the agent's log
// holds one warning per damaged object, not one per fetch.
func TestKcatDamagedObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the strand binary")
	}
	kcat := requireCommand(t, "kcat")
	dataDir := t.TempDir()
	kafkaAddr, httpAddr := freeAddr(t), freeAddr(t)
	args := []string{"--data-dir", dataDir, "--kafka-listen", kafkaAddr, "--http-listen", httpAddr}
	proc := startProcess(t, httpAddr, args...)
	k := kcatRunner{t: t, path: kcat, addr: kafkaAddr}

	const n = 100
	for _, topic := range []string{"corrupt", "missing"} {
		createTopic(t, kafkaAddr, topic, 1)
		kvs := make([]keyValue, n)
		for i := range kvs {
			kvs[i] = keyValue{"k", fmt.Sprintf("%s-value-%03d", topic, i)}
		}
		k.produce(t, topic, kvs)
	}
	proc.kill()

	path, at := storedValue(t, dataDir, "corrupt-value-042")
	obj, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	obj[at+len("corrupt-value-0")] ^= 0x01 // 042 -> 052
	if err := os.WriteFile(path, obj, 0o644); err != nil {
		t.Fatal(err)
	}
	path, _ = storedValue(t, dataDir, "missing-value-000")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}

	proc = startProcess(t, httpAddr, args...)
	for _, tc := range []struct {
		topic, wantErr string
	}{
		// librdkafka's names for CORRUPT_MESSAGE (2, its
		// ERR_INVALID_MSG) and UNKNOWN_SERVER_ERROR (-1).
		{"corrupt", "Broker: Invalid message"},
		{"missing", "Unknown broker error"},
	} {
		t.Run(tc.topic, func(t *testing.T) {
			out, errLine := k.consumeUntilError(t, tc.topic)
			for line := range strings.Lines(out) {
				off, value, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
				o, err := strconv.Atoi(off)
				if err != nil {
					t.Fatalf("kcat line %q", line)
				}
				if want := fmt.Sprintf("%s-value-%03d", tc.topic, o); value != want {
					t.Errorf("kcat printed offset %d = %q, want %q", o, value, want)
				}
			}
			if !strings.Contains(errLine, tc.wantErr) {
				t.Fatalf("kcat reported %q, want an error with %q", errLine, tc.wantErr)
			}
		})
	}
	t.Run("storage verify", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, strandBinary(t), "storage", "verify", "--http", httpAddr)
		out, err := cmd.Output()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("strand storage verify: %v, want exit status 1\n%s", err, out)
		}
		for _, want := range []string{"damaged objects: 2 (1 missing, 1 corrupt)", "missing  missing", "corrupt  corrupt"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("strand storage verify output lacks %q:\n%s", want, out)
			}
		}
	})
	warnings := 0
	for line := range strings.Lines(proc.stderr.String()) {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			warnings++
		}
	}
	if warnings > 2 {
		t.Errorf("the agent logged %d warnings for 2 damaged objects, want at most 2:\n%s", warnings, proc.stderr.String())
	}
}

// storedValue returns the data object under dataDir holding value, and
// value's position in it.
func storedValue(t *testing.T, dataDir, value string) (string, int) {
	t.Helper()
	var path string
	var at int
	err := filepath.WalkDir(filepath.Join(dataDir, "objects"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".strd") || path != "" {
			return err
		}
		b, err := os.ReadFile(p)
		if i := bytes.Index(b, []byte(value)); err == nil && i >= 0 {
			path, at = p, i
		}
		return err
	})
	if err != nil || path == "" {
		t.Fatalf("no data object under %s holds %q (%v)", dataDir, value, err)
	}
	return path, at
}

// consumeUntilError consumes topic from the beginning with kcat, printing
// offset and value, until kcat reports an error on stderr, and returns
// what it printed and the error line. It fails the test if kcat ends or
// stays silent for kcatErrorWait instead.
func (k kcatRunner) consumeUntilError(t *testing.T, topic string) (stdout, errLine string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kcatErrorWait)
	defer cancel()
	isError := func(line string) bool { return strings.Contains(line, "ERROR") }
	stdout, lines, errLine, err := k.exec(ctx, t, nil, isError,
		"-C", "-t", topic, "-o", "beginning", "-e", "-X", "fetch.wait.max.ms=20", "-f", "%o\t%s\n")
	if errLine == "" {
		t.Fatalf("kcat -C -t %s reported no error (ended: %v, context: %v)\nstdout:\n%s\nstderr:\n%s",
			topic, err, ctx.Err(), stdout, strings.Join(lines, "\n"))
	}
	return stdout, errLine
}
