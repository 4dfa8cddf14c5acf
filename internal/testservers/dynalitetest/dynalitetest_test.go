package dynalitetest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/testservers/dynalitetest"
)

// TestStartStop starts a server, checks it answers a DynamoDB request,
// and that Stop ends it.
func TestStartStop(t *testing.T) {
	s := dynalitetest.Start(t)
	if err := listTables(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get(s.Endpoint); err == nil {
		resp.Body.Close()
		t.Fatalf("server still answers after Stop")
	}
}

// TestPause checks that a paused server answers nothing until resumed.
func TestPause(t *testing.T) {
	s := dynalitetest.Start(t)
	s.Pause()
	// Bounded only so a server that answers fails the test quickly.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := listTables(ctx, s); err == nil {
		s.Resume()
		t.Fatal("a paused server answered")
	}
	s.Resume()
	if err := listTables(t.Context(), s); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
}

// listTables sends a DynamoDB ListTables request and checks the answer.
func listTables(ctx context.Context, s *dynalitetest.Server) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoint, strings.NewReader("{}"))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=00")
	req.Header.Set("X-Amz-Date", "20260101T000000Z")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("ListTables: %w", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "TableNames") {
		return fmt.Errorf("ListTables = %d %s", resp.StatusCode, body)
	}
	return nil
}
