package agent

// Kafka listeners: Kafka's listeners, advertised.listeners and
// listener.security.protocol.map, and the TLS files every TLS listener
// serves with. --kafka-listen and --advertise are the one PLAINTEXT
// listener of builds before listeners, and still mean that.

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/certs"
	"github.com/strandkafka/strand/internal/kafka"
	"github.com/strandkafka/strand/internal/meta"
)

// listenerSpec is one entry of Listeners, its protocol resolved.
type listenerSpec struct {
	name     string
	protocol auth.SecurityProtocol
	addr     string // host:port to bind
	// zone is the zone of this listener's clients (ListenerRacks),
	// "" when they say theirs.
	zone string
}

// boundListener is a listener spec with its socket and advertised
// address.
type boundListener struct {
	listenerSpec
	ln       net.Listener
	endpoint kafka.Endpoint
}

// maxListeners bounds how many listeners one agent opens (and carries
// in its heartbeat).
const maxListeners = 16

// listenerSpecs resolves Listeners (or KafkaListen) and the protocol
// map.
func (c *Config) listenerSpecs() ([]listenerSpec, error) {
	protocols, err := parseProtocolMap(c.ListenerSecurityProtocolMap)
	if err != nil {
		return nil, err
	}
	zones, err := parseListenerRacks(c.ListenerRacks)
	if err != nil {
		return nil, err
	}
	if c.Listeners == "" {
		name := kafka.PlaintextListener.Name
		for z := range zones {
			if z != name {
				return nil, fmt.Errorf("listener-racks: no listener %s", z)
			}
		}
		return []listenerSpec{{name: name, protocol: auth.Plaintext, addr: c.KafkaListen, zone: zones[name]}}, nil
	}
	named, err := parseListenerList("listeners", c.Listeners)
	if err != nil {
		return nil, err
	}
	for z := range zones {
		if !slices.ContainsFunc(named, func(n namedAddr) bool { return n.name == z }) {
			return nil, fmt.Errorf("listener-racks: no listener %s", z)
		}
	}
	specs := make([]listenerSpec, 0, len(named))
	ports := map[string]string{}
	for _, n := range named {
		p, ok := protocols[n.name]
		if !ok {
			return nil, fmt.Errorf("listeners: %s has no security protocol; name it in listener-security-protocol-map", n.name)
		}
		if _, port, _ := net.SplitHostPort(n.addr); port != "0" {
			if other, dup := ports[port]; dup {
				return nil, fmt.Errorf("listeners: %s and %s share port %s", other, n.name, port)
			}
			ports[port] = n.name
		}
		specs = append(specs, listenerSpec{name: n.name, protocol: p, addr: n.addr, zone: zones[n.name]})
	}
	return specs, nil
}

// advertisedAddrs resolves AdvertisedListeners (or Advertise) by
// listener name; a listener it does not name advertises its bound
// address.
func (c *Config) advertisedAddrs(specs []listenerSpec) (map[string]string, error) {
	if c.AdvertisedListeners == "" {
		if c.Advertise != "" {
			return map[string]string{specs[0].name: c.Advertise}, nil
		}
		return nil, nil
	}
	named, err := parseListenerList("advertised-listeners", c.AdvertisedListeners)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(named))
	for _, n := range named {
		known := false
		for _, s := range specs {
			known = known || s.name == n.name
		}
		if !known {
			return nil, fmt.Errorf("advertised-listeners: %s is not in listeners", n.name)
		}
		if host, port, _ := net.SplitHostPort(n.addr); host == "" || port == "0" {
			return nil, fmt.Errorf("advertised-listeners: %s://%s needs a host and a fixed port", n.name, n.addr)
		}
		out[n.name] = n.addr
	}
	return out, nil
}

// tlsFiles is the TLS settings as certs.ServerFiles.
func (c *Config) tlsFiles() (certs.ServerFiles, error) {
	ca, err := certs.ParseClientAuth(c.TLSClientAuth)
	if err != nil {
		return certs.ServerFiles{}, err
	}
	return certs.ServerFiles{CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile, ClientCAFile: c.TLSClientCAFile, ClientAuth: ca}, nil
}

// validateListeners reports problems with the listener settings.
func (c *Config) validateListeners() error {
	if c.Listeners != "" && c.KafkaListen != "" {
		return errors.New("listeners and kafka-listen: give one (kafka-listen is the PLAINTEXT listener of --listeners)")
	}
	if c.Advertise != "" && (c.Listeners != "" || c.AdvertisedListeners != "") {
		return errors.New("advertise: with listeners or advertised-listeners, give addresses in advertised-listeners")
	}
	specs, err := c.listenerSpecs()
	if err != nil {
		return err
	}
	if _, err := c.advertisedAddrs(specs); err != nil {
		return err
	}
	files, err := c.tlsFiles()
	if err != nil {
		return fmt.Errorf("tls-client-auth: %w", err)
	}
	for _, s := range specs {
		if s.protocol.TLS() {
			if err := files.Validate(); err != nil {
				return fmt.Errorf("listener %s (%v): %w (tls-cert-file, tls-key-file, tls-client-ca-file)", s.name, s.protocol, err)
			}
			break
		}
	}
	return nil
}

type namedAddr struct{ name, addr string }

// parseListenerList parses Kafka's "NAME://host:port,NAME://host:port".
// Names are case-insensitive in Kafka and upper-cased here; an empty
// host binds every interface.
func parseListenerList(setting, s string) ([]namedAddr, error) {
	var out []namedAddr
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		name, addr, ok := strings.Cut(item, "://")
		if !ok || name == "" {
			return nil, fmt.Errorf("%s: %q is not NAME://host:port", setting, item)
		}
		name = strings.ToUpper(name)
		if !validListenerName(name) {
			return nil, fmt.Errorf("%s: listener name %q: want letters, digits and _", setting, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("%s: listener %s named twice", setting, name)
		}
		seen[name] = true
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", setting, item, err)
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
			return nil, fmt.Errorf("%s: %s: bad port", setting, item)
		}
		out = append(out, namedAddr{name, addr})
	}
	if len(out) > maxListeners {
		return nil, fmt.Errorf("%s: %d listeners, at most %d", setting, len(out), maxListeners)
	}
	return out, nil
}

func validListenerName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// parseProtocolMap parses listener.security.protocol.map,
// "NAME:PROTOCOL,...", on top of Kafka's default, which maps each
// protocol's name to itself.
func parseProtocolMap(s string) (map[string]auth.SecurityProtocol, error) {
	m := map[string]auth.SecurityProtocol{}
	for _, p := range []auth.SecurityProtocol{auth.Plaintext, auth.SSL, auth.SASLPlaintext, auth.SASLSSL} {
		m[p.String()] = p
	}
	if s == "" {
		return m, nil
	}
	for _, item := range strings.Split(s, ",") {
		name, proto, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			return nil, fmt.Errorf("listener-security-protocol-map: %q is not NAME:PROTOCOL", item)
		}
		p, err := auth.ParseSecurityProtocol(proto)
		if err != nil {
			return nil, fmt.Errorf("listener-security-protocol-map: %w", err)
		}
		name = strings.ToUpper(name)
		if !validListenerName(name) {
			return nil, fmt.Errorf("listener-security-protocol-map: listener name %q: want letters, digits and _", name)
		}
		m[name] = p
	}
	return m, nil
}

// openListeners binds every listener and resolves its advertised
// address. On error it closes what it opened.
func (a *Agent) openListeners() (err error) {
	specs, err := a.cfg.listenerSpecs()
	if err != nil {
		return err
	}
	adv, err := a.cfg.advertisedAddrs(specs)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			for _, l := range a.listeners {
				l.ln.Close()
			}
			a.listeners = nil
		}
	}()
	for _, s := range specs {
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			return fmt.Errorf("kafka listen %s://%s: %w", s.name, s.addr, err)
		}
		a.listeners = append(a.listeners, &boundListener{listenerSpec: s, ln: ln})
		host, port, err := advertised(adv[s.name], ln.Addr())
		if err != nil {
			return err
		}
		a.listeners[len(a.listeners)-1].endpoint = kafka.Endpoint{Listener: s.name, Host: host, Port: port}
	}
	return nil
}

// kafkaListeners makes the kafka.Listener of each bound listener, with
// one reloading TLS configuration shared by the TLS ones.
func (a *Agent) kafkaListeners(logger *slog.Logger) ([]kafka.Listener, error) {
	var tlsServer *certs.Server
	out := make([]kafka.Listener, len(a.listeners))
	for i, l := range a.listeners {
		out[i] = kafka.Listener{Name: l.name, Protocol: l.protocol, Zone: l.zone}
		if !l.protocol.TLS() {
			continue
		}
		if tlsServer == nil {
			files, err := a.cfg.tlsFiles()
			if err != nil {
				return nil, err
			}
			if tlsServer, err = certs.NewServer(files, logger); err != nil {
				return nil, err
			}
		}
		out[i].TLS = tlsServer.Config()
	}
	return out, nil
}

// endpoints are the advertised addresses of every listener, in order.
func (a *Agent) endpoints() []kafka.Endpoint {
	out := make([]kafka.Endpoint, len(a.listeners))
	for i, l := range a.listeners {
		out[i] = l.endpoint
	}
	return out
}

// ListenerAddr is the address the named listener bound, or "".
func (a *Agent) ListenerAddr(name string) string {
	for _, l := range a.listeners {
		if l.name == strings.ToUpper(name) {
			return l.ln.Addr().String()
		}
	}
	return ""
}

// listenerSummary is the listeners for the start-up log line:
// NAME(PROTOCOL)=bound->advertised.
func (a *Agent) listenerSummary() string {
	parts := make([]string, len(a.listeners))
	for i, l := range a.listeners {
		parts[i] = fmt.Sprintf("%s(%v)=%s->%s", l.name, l.protocol, l.ln.Addr(),
			net.JoinHostPort(l.endpoint.Host, strconv.Itoa(int(l.endpoint.Port))))
	}
	return strings.Join(parts, ",")
}

// agentEndpoints are the advertised listeners as the heartbeat carries
// them to the other agents (written from metadata level 4).
func (a *Agent) agentEndpoints() []meta.AgentEndpoint {
	out := make([]meta.AgentEndpoint, len(a.listeners))
	for i, l := range a.listeners {
		out[i] = meta.AgentEndpoint{Listener: l.endpoint.Listener, Host: l.endpoint.Host, Port: l.endpoint.Port}
	}
	return out
}

// parseListenerRacks parses ListenerRacks, "NAME:zone,...": the zone of
// every client of each named listener (per-zone listeners), so clients
// need no setting of their own to be served in their zone.
func parseListenerRacks(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, e := range strings.Split(s, ",") {
		name, zone, ok := strings.Cut(strings.TrimSpace(e), ":")
		switch {
		case !ok || !validListenerName(name):
			return nil, fmt.Errorf("listener-racks %q: want NAME:zone", e)
		case !kafka.ValidZone(zone):
			return nil, fmt.Errorf("listener-racks %q: a zone is 1-64 letters, digits, '-', '_' or '.'", e)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("listener-racks: %s given twice", name)
		}
		out[name] = zone
	}
	return out, nil
}

// listenerZones are the zones of the per-zone listeners.
func (c *Config) listenerZones() []string {
	zones, _ := parseListenerRacks(c.ListenerRacks)
	out := make([]string, 0, len(zones))
	for _, z := range zones {
		out = append(out, z)
	}
	return out
}
