package agent_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/agent"
)

// TestKafkaPortInUse: an agent whose Kafka port another process holds
// fails before it creates its data dir (so before any log replay), and
// says which port and which flag, and that the port is in use.
func TestKafkaPortInUse(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	for _, tc := range []struct {
		name string
		cfg  agent.Config
		flag string
	}{
		{"kafka-listen", agent.Config{KafkaListen: addr}, "--kafka-listen"},
		{"listeners", agent.Config{Listeners: "PLAINTEXT://127.0.0.1:0,CLIENT://" + addr, ListenerSecurityProtocolMap: "PLAINTEXT:PLAINTEXT,CLIENT:PLAINTEXT"}, "--listeners"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			cfg := tc.cfg
			cfg.DataDir, cfg.HTTPListen = dir, "127.0.0.1:0"
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			a, err := agent.Start(ctx, cfg, quietLogger())
			if err == nil {
				a.Stop(context.Background())
				t.Fatal("Start succeeded on a port in use")
			}
			if !errors.Is(err, agent.ErrPortInUse) {
				t.Errorf("err = %v, want ErrPortInUse", err)
			}
			for _, want := range []string{addr, tc.flag, "in use"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the data dir was created before the port was found in use: %v", err)
			}
		})
	}
	// The port free again, the same config starts.
	held.Close()
	a := startWith(t, agent.Config{DataDir: t.TempDir(), KafkaListen: addr}, nil)
	if a.KafkaAddr() != addr {
		t.Errorf("KafkaAddr %s, want %s", a.KafkaAddr(), addr)
	}
}
