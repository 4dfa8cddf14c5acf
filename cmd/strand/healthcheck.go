package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strandkafka/strand/internal/agent"
)

// newHealthcheckCmd is `strand healthcheck`: GET /readyz of a local agent,
// exit 0 when it is ready and 1 otherwise. It exists for images with no
// shell or curl (the Dockerfile's HEALTHCHECK, a Kubernetes exec probe).
func newHealthcheckCmd() *cobra.Command {
	var (
		addr    string
		caFile  string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 if the agent's /readyz answers 200, 1 otherwise",
		Long: `Ask a running agent whether it is ready (GET /readyz) and exit 0 if it is,
1 if not, printing the agent's reason. --http defaults to the address
STRAND_HTTP_LISTEN names (as strand serve reads it), with a wildcard host
asked on loopback, else ` + agent.DefaultHTTPListen + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			url, err := readyzURL(addr)
			if err != nil {
				return err
			}
			client := &http.Client{Timeout: timeout}
			if caFile != "" {
				pem, err := os.ReadFile(caFile)
				if err != nil {
					return err
				}
				pool := x509.NewCertPool()
				if !pool.AppendCertsFromPEM(pem) {
					return fmt.Errorf("ca-file %s: no PEM certificates", caFile)
				}
				client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return fmt.Errorf("not ready: %w", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			msg := strings.TrimSpace(string(body))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s: %s", url, resp.Status, msg)
			}
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "http", "", "the agent's HTTP address, host:port or an http(s):// URL (default: from STRAND_HTTP_LISTEN, else "+agent.DefaultHTTPListen+")")
	f.StringVar(&caFile, "ca-file", "", "PEM CAs to verify an https:// agent with (default: the system's)")
	f.DurationVar(&timeout, "timeout", 5*time.Second, "give up after this long")
	return cmd
}

// readyzURL turns --http (or the agent's listen address) into the URL of
// its /readyz.
func readyzURL(addr string) (string, error) {
	if addr == "" {
		addr = os.Getenv("STRAND_HTTP_LISTEN")
	}
	if addr == "" {
		addr = agent.DefaultHTTPListen
	}
	if strings.Contains(addr, "://") {
		return strings.TrimSuffix(addr, "/") + "/readyz", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("http address %q: %w", addr, err)
	}
	// A listener on every interface is reachable on loopback.
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}
