package agent

// strand_tls_certificate_expiry_timestamp_seconds: when each TLS
// certificate the agent serves or trusts expires, per listener.
//
// A timestamp rather than a countdown (..._seconds_until_expiry):
// Prometheus's convention for a moment (process_start_time_seconds,
// blackbox_exporter's probe_ssl_earliest_cert_expiry) is seconds since
// the epoch, which stays exact between scrapes and needs no clock in
// the agent; `(x - time()) / 86400` is the days left, and an alert is
// `x - time() < 14 * 86400`.
//
// Collected at scrape time from each listener's reloading certs.Server,
// which reads its files again first, so a rotated certificate shows at
// the next scrape whether or not a client has connected since.

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strandkafka/strand/internal/certs"
)

var certExpiryDesc = prometheus.NewDesc("strand_tls_certificate_expiry_timestamp_seconds",
	"When a TLS certificate this agent serves or trusts expires, in seconds since the epoch: each TLS listener's certificate (kind certificate, chain for intermediates) and the CAs it checks client certificates against (client_ca). Read again from the files at each scrape, so a rotation shows at once.",
	[]string{"listener", "file", "kind", "subject"}, nil)

// certExpiry is the collector of the TLS servers' certificates.
type certExpiry struct {
	mu struct {
		sync.Mutex
		// servers by listener name, in the order they were added;
		// bounded by the agent's listeners.
		names   []string
		servers []*certs.Server
	}
}

// watch adds the certificates s serves on listener.
func (c *certExpiry) watch(listener string, s *certs.Server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.names = append(c.mu.names, listener)
	c.mu.servers = append(c.mu.servers, s)
}

func (c *certExpiry) Describe(ch chan<- *prometheus.Desc) { ch <- certExpiryDesc }

func (c *certExpiry) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	names, servers := c.mu.names, c.mu.servers
	c.mu.Unlock()
	type key struct{ listener, file, kind, subject string }
	for i, s := range servers {
		// A bundle may hold two certificates of one subject (a CA
		// renewed under the same name): the earliest expiry is the
		// one to act on, and one sample per label set is all a
		// registry takes.
		earliest := map[key]float64{}
		var order []key
		for _, cert := range s.Certificates() {
			k := key{names[i], cert.File, cert.Kind, cert.Subject}
			ts := float64(cert.NotAfter.Unix())
			if old, ok := earliest[k]; !ok || ts < old {
				if !ok {
					order = append(order, k)
				}
				earliest[k] = ts
			}
		}
		for _, k := range order {
			ch <- prometheus.MustNewConstMetric(certExpiryDesc, prometheus.GaugeValue, earliest[k], k.listener, k.file, k.kind, k.subject)
		}
	}
}
