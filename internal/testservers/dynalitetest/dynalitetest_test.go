package dynalitetest_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/testservers/dynalitetest"
)

// TestStartStop starts a server, checks it answers a DynamoDB request,
// and that Stop ends it.
func TestStartStop(t *testing.T) {
	s := dynalitetest.Start(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.Endpoint, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=00")
	req.Header.Set("X-Amz-Date", "20260101T000000Z")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("ListTables: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "TableNames") {
		t.Fatalf("ListTables = %d %s", resp.StatusCode, body)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get(s.Endpoint); err == nil {
		resp.Body.Close()
		t.Fatalf("server still answers after Stop")
	}
}
