package connect

// Managing connectors, apart from how the request came: Kafka Connect's
// REST API (rest.go) and the SQL endpoint's CREATE/ALTER/DROP CONNECTOR
// and SHOW CONNECTORS (package sql/catalog) both call a Manager, so a
// connector made either way is checked by its class, has its secrets
// sealed in the object store and is authorized on the same CONNECTOR
// ACLs. Refusals are *Error with Connect's HTTP status; a front end
// that is not HTTP maps the status (and Error.Err, the class's own
// message for a bad config) to its own codes.

import (
	"context"
	"errors"
	"net/http"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/meta"
)

// Caller is who asks for something, as its front end knows it.
type Caller struct {
	// Principal is recorded as the owner of a connector it creates or
	// configures (Env.Authorize asks for the owner's rights).
	Principal string
	// Authorize decides whether the caller may do op on the connector
	// name: nil, or the refusal (403, or 401/500 from the front end).
	// For CREATE the front end asks the cluster, then the name. Nil
	// allows everything.
	Authorize func(op acl.Operation, name string) *Error
	// Filter is Authorize for a listing, which leaves out what the
	// caller may not see rather than refusing it, so the front end
	// writes no denial to the authorization log. Nil: Authorize.
	Filter func(op acl.Operation, name string) *Error
}

func (c Caller) authorize(op acl.Operation, name string) *Error {
	if c.Authorize == nil {
		return nil
	}
	return c.Authorize(op, name)
}

func (c Caller) filter(op acl.Operation, name string) *Error {
	if c.Filter == nil {
		return c.authorize(op, name)
	}
	return c.Filter(op, name)
}

// ManagerConfig configures a Manager: the fields of APIConfig it needs.
type ManagerConfig struct {
	Store   Store
	Classes *ClassSet
	Secrets *Secrets
	// Placed is APIConfig.Placed.
	Placed func(name string) (node int32, worker string)
}

// Manager creates, configures, deletes and lists connectors for a
// Caller. Safe for concurrent use: its state is the metadata's.
type Manager struct {
	cfg ManagerConfig
}

// NewManager returns a Manager over cfg.
func NewManager(cfg ManagerConfig) *Manager { return &Manager{cfg: cfg} }

// Lookup reads name, catching this copy up with the log before
// answering 404: a connector created through another agent a moment
// ago is found.
func (m *Manager) Lookup(ctx context.Context, name string) (meta.Connector, *Error) {
	for synced := false; ; synced = true {
		v := m.cfg.Store.View()
		c, ok, err := v.Connector(name)
		v.Close()
		switch {
		case err != nil:
			return meta.Connector{}, errorf(http.StatusInternalServerError, "reading the metadata: %v", err)
		case ok:
			return c, nil
		case synced:
			return meta.Connector{}, errorf(http.StatusNotFound, "Connector %s not found", name)
		}
		if err := m.cfg.Store.Sync(ctx); err != nil {
			return meta.Connector{}, errorf(http.StatusServiceUnavailable, "catching up with the log: %v", err)
		}
	}
}

// Get reads name for a caller that needs op on it. A refusal is 403
// whether or not the connector exists, as Kafka answers
// TOPIC_AUTHORIZATION_FAILED for a named topic: the answer tells
// nothing about connectors the caller may not see.
func (m *Manager) Get(ctx context.Context, who Caller, op acl.Operation, name string) (meta.Connector, *Error) {
	if e := who.authorize(op, name); e != nil {
		return meta.Connector{}, e
	}
	return m.Lookup(ctx, name)
}

// Visible lists the connectors of this agent's copy the caller may
// DESCRIBE (Connect's list; Kafka's Metadata leaves out topics the same
// way).
func (m *Manager) Visible(who Caller) ([]meta.Connector, *Error) {
	v := m.cfg.Store.View()
	conns, err := v.Connectors()
	v.Close()
	if err != nil {
		return nil, errorf(http.StatusInternalServerError, "reading the metadata: %v", err)
	}
	var visible []meta.Connector
	for _, c := range conns {
		if e := who.filter(kmsg.ACLOperationDescribe, c.Name); e != nil {
			if e.Status == http.StatusForbidden {
				continue
			}
			return nil, e
		}
		visible = append(visible, c)
	}
	return visible, nil
}

// Create makes connector name of cfg (POST /connectors): CREATE on the
// cluster or the name, 409 if it exists.
func (m *Manager) Create(ctx context.Context, who Caller, name string, cfg map[string]string) (meta.Connector, *Error) {
	if msg := meta.ValidConnectorName(name); msg != "" {
		return meta.Connector{}, errorf(http.StatusBadRequest, "%s", msg)
	}
	if e := who.authorize(kmsg.ACLOperationCreate, name); e != nil {
		return meta.Connector{}, e
	}
	c, _, e := m.put(ctx, who, name, cfg, meta.PutCreate)
	return c, e
}

// Configure creates name with cfg, or replaces an existing one's config
// (PUT /connectors/{name}/config): ALTER on an existing connector,
// CREATE on a new one. created says which it did.
func (m *Manager) Configure(ctx context.Context, who Caller, name string, cfg map[string]string) (c meta.Connector, created bool, e *Error) {
	v := m.cfg.Store.View()
	_, exists, err := v.Connector(name)
	v.Close()
	if err != nil {
		return meta.Connector{}, false, errorf(http.StatusInternalServerError, "reading the metadata: %v", err)
	}
	op, mode := kmsg.ACLOperationCreate, meta.PutCreateOrUpdate
	if exists {
		op, mode = kmsg.ACLOperationAlter, meta.PutUpdate
	}
	if e := who.authorize(op, name); e != nil {
		return meta.Connector{}, false, e
	}
	return m.put(ctx, who, name, cfg, mode)
}

// Alter changes some keys of an existing connector's config: set's
// values replace or add, unset's keys are removed (ALTER on the name,
// 404 if it does not exist). Secrets not named keep their stored value,
// as a PUT of the masked config keeps them.
func (m *Manager) Alter(ctx context.Context, who Caller, name string, set map[string]string, unset []string) (meta.Connector, *Error) {
	c, e := m.Get(ctx, who, kmsg.ACLOperationAlter, name)
	if e != nil {
		return meta.Connector{}, e
	}
	cfg := m.Info(c).Config
	for k, v := range set {
		cfg[k] = v
	}
	for _, k := range unset {
		delete(cfg, k)
	}
	c, _, e = m.put(ctx, who, name, cfg, meta.PutUpdate)
	return c, e
}

// Delete deletes name: DELETE on it.
func (m *Manager) Delete(ctx context.Context, who Caller, name string) *Error {
	c, e := m.Get(ctx, who, kmsg.ACLOperationDelete, name)
	if e != nil {
		return e
	}
	_, e = m.propose(ctx, meta.DeleteConnector{Name: c.Name})
	return e
}

// Info is c as GET /connectors/{name} shows it, secrets masked.
func (m *Manager) Info(c meta.Connector) ConnectorInfo {
	class, _ := m.cfg.Classes.Lookup(c.Config["connector.class"])
	return ConnectorInfo{Name: c.Name, Config: Masked(class, c.Config), Tasks: []TaskID{{Connector: c.Name, Task: 0}}, Type: kindOf(m.cfg.Classes, c)}
}

// Status is c's status as GET /connectors/{name}/status shows it.
func (m *Manager) Status(c meta.Connector) Status { return StatusOf(c, m.cfg.Classes, m.cfg.Placed) }

// put checks cfg against its class, seals its secrets and proposes it.
func (m *Manager) put(ctx context.Context, who Caller, name string, cfg map[string]string, mode meta.PutMode) (meta.Connector, bool, *Error) {
	if msg := meta.ValidConnectorName(name); msg != "" {
		return meta.Connector{}, false, errorf(http.StatusBadRequest, "%s", msg)
	}
	if n, ok := cfg["name"]; ok && n != name {
		return meta.Connector{}, false, errorf(http.StatusBadRequest, "Connector name configuration (%s) doesn't match connector name in the URL (%s)", n, name)
	}
	cfg["name"] = name
	className, ok := cfg["connector.class"]
	if !ok {
		return meta.Connector{}, false, errorf(http.StatusBadRequest, "Connector config %v contains no connector type", keysOf(cfg))
	}
	class, ok := m.cfg.Classes.Lookup(className)
	if !ok {
		return meta.Connector{}, false, errorf(http.StatusBadRequest, "Failed to find any class that implements Connector and which name matches %s, available connectors are: %v", className, m.classNames())
	}
	var old map[string]string
	if mode != meta.PutCreate {
		v := m.cfg.Store.View()
		prev, ok, err := v.Connector(name)
		v.Close()
		if err != nil {
			return meta.Connector{}, false, errorf(http.StatusInternalServerError, "reading the metadata: %v", err)
		}
		if ok {
			old = prev.Config
		}
	}
	sealed, err := m.cfg.Secrets.Seal(ctx, name, class, cfg, old)
	if err != nil {
		if errors.Is(err, ErrMaskedUnknown) {
			return meta.Connector{}, false, &Error{Status: http.StatusBadRequest, Message: err.Error(), Err: err}
		}
		return meta.Connector{}, false, errorf(http.StatusInternalServerError, "%v", err)
	}
	resolved, err := m.cfg.Secrets.Resolve(ctx, sealed)
	if err != nil {
		return meta.Connector{}, false, errorf(http.StatusInternalServerError, "%v", err)
	}
	if err := class.Validate(resolved); err != nil {
		e := errorf(http.StatusBadRequest, "Connector configuration is invalid and contains the following 1 error(s):\n%v\nYou can also find the above list of errors at the endpoint `/connector-plugins/{connectorType}/config/validate`", err)
		e.Err = err
		return meta.Connector{}, false, e
	}
	res, e := m.propose(ctx, meta.PutConnector{Name: name, Config: sealed, Owner: who.Principal, Mode: mode})
	if e != nil {
		return meta.Connector{}, false, e
	}
	c, e := m.Lookup(ctx, name)
	return c, res.ConnectorCreated, e
}

func (m *Manager) classNames() []string {
	var out []string
	for _, c := range m.cfg.Classes.List() {
		out = append(out, c.Name)
	}
	return out
}

// propose writes c, turning its refusal into Connect's answer.
func (m *Manager) propose(ctx context.Context, c meta.Command) (meta.Result, *Error) {
	res, err := m.cfg.Store.Propose(ctx, c)
	switch {
	case errors.Is(err, meta.ErrNotAtLevel):
		e := errorf(http.StatusServiceUnavailable, "connectors need %s %d or higher (strand features upgrade)", meta.FeatureMetadata, meta.MetadataLevel8)
		e.Err = err
		return res, e
	case err != nil:
		return res, errorf(http.StatusServiceUnavailable, "writing to the log: %v", err)
	case res.ConnectorError != 0:
		return res, errorf(int(res.ConnectorError), "%s", res.Message)
	case res.Code != 0:
		return res, errorf(http.StatusInternalServerError, "%v", res.Err())
	}
	return res, nil
}
