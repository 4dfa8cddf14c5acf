package kafka

import (
	"context"
	"net"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/auth"
)

// A connection served with ServeConnAs runs as the principal given, with
// no authentication: as the super user it sees a topic an anonymous
// connection (ServeConn) is not allowed to see. A SASL listener is
// refused: it would ask the principal to authenticate.
func TestServeConnAs(t *testing.T) {
	a := newACLAgent(t)
	if _, err := kadm.NewClient(a.admin).CreateTopic(a.ctx(t), 1, -1, nil, "hidden"); err != nil {
		t.Fatal(err)
	}
	pipeClient := func(serve func(net.Conn)) *kgo.Client {
		return a.kgoClient(t, kgo.Dialer(func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, s := net.Pipe()
			go serve(s)
			return c, nil
		}))
	}
	super := pipeClient(func(s net.Conn) { a.ServeConnAs(context.Background(), s, PlaintextListener, auth.User("admin")) })
	anon := pipeClient(func(s net.Conn) { a.ServeConn(context.Background(), s) })
	if got := a.visibleTopics(t, super); !slices.Contains(got, "hidden") {
		t.Errorf("served as the super user, Metadata lists %v; want hidden among them", got)
	}
	if got := a.visibleTopics(t, anon); slices.Contains(got, "hidden") {
		t.Errorf("served anonymously, Metadata lists %v; want hidden left out", got)
	}

	c, s := net.Pipe()
	defer c.Close()
	err := a.ServeConnAs(context.Background(), s, Listener{Name: "SASL", Protocol: auth.SASLPlaintext}, auth.User("admin"))
	if err == nil {
		t.Error("ServeConnAs took a SASL listener")
	}
}
