package catalog

// Connectors from SQL: CREATE CONNECTOR, ALTER CONNECTOR ... SET, DROP
// CONNECTOR and SHOW CONNECTORS do what Kafka Connect's REST API does,
// through the same connect.Manager (Config.Connectors): the class checks
// the config, secrets go to the object store (the statement's text is
// kept nowhere), and the session's principal needs the CONNECTOR ACLs
// the REST API asks (CREATE on the cluster or the name, ALTER, DELETE,
// DESCRIBE to list), and becomes the owner whose topic rights the task
// has. Connect's refusals become SQLSTATEs: 409 duplicate_object, 404
// undefined_object, 403 insufficient_privilege, 400
// invalid_parameter_value with the class's message.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/twmb/franz-go/pkg/kmsg"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/connect"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/parse"
	"github.com/strandkafka/strand/internal/sql/pgwire"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
)

// codeInvalidName is PostgreSQL's invalid_name.
const codeInvalidName = "42602"

// connectorColumns are SHOW CONNECTORS' columns: what GET
// /connectors/{name}/status says of the connector and its one task.
var connectorColumns = []string{"name", "class", "type", "state", "task_state", "worker", "trace"}

// prepareConnector makes a connector statement.
func (s *session) prepareConnector(st parse.Statement) (pgwire.Statement, error) {
	m := s.e.cfg.Connectors
	if m == nil {
		return nil, pgwire.NotSupported("connectors are not run by this agent")
	}
	n := st.Node
	switch {
	case n.GetVariableShowStmt() != nil:
		return s.showConnectors(m), nil
	case n.GetDefineStmt() != nil:
		def := n.GetDefineStmt()
		name, err := connectorName(def.Defnames)
		if err != nil {
			return nil, err
		}
		cfg, _, err := connectorOptions(st, def.Definition, false)
		if err != nil {
			return nil, err
		}
		return s.ddl("CREATE CONNECTOR", func(ctx context.Context) error {
			_, e := m.Create(ctx, s.caller(), name, cfg)
			if e != nil && e.Status == http.StatusConflict && def.IfNotExists {
				s.client.Notice("NOTICE", sqlerr.DuplicateObject, fmt.Sprintf("connector %q already exists, skipping", name))
				return nil
			}
			return connectorError(e, name)
		}), nil
	case n.GetAlterTypeStmt() != nil:
		at := n.GetAlterTypeStmt()
		name, err := connectorName(at.TypeName)
		if err != nil {
			return nil, err
		}
		set, unset, err := connectorOptions(st, at.Options, true)
		if err != nil {
			return nil, err
		}
		return s.ddl("ALTER CONNECTOR", func(ctx context.Context) error {
			_, e := m.Alter(ctx, s.caller(), name, set, unset)
			return connectorError(e, name)
		}), nil
	case n.GetDropStmt() != nil:
		ds := n.GetDropStmt()
		if ds.Behavior == pg.DropBehavior_DROP_CASCADE {
			return nil, pgwire.NotSupported("DROP CONNECTOR takes no CASCADE: nothing depends on a connector")
		}
		var names []string
		for _, o := range ds.Objects {
			name, err := connectorName(o.GetList().GetItems())
			if err != nil {
				return nil, err
			}
			names = append(names, name)
		}
		return s.ddl("DROP CONNECTOR", func(ctx context.Context) error {
			// One at a time, as the REST API deletes: a refusal
			// leaves the names before it dropped.
			for _, name := range names {
				e := m.Delete(ctx, s.caller(), name)
				if e != nil && e.Status == http.StatusNotFound && ds.MissingOk {
					s.client.Notice("NOTICE", sqlerr.UndefinedObject, fmt.Sprintf("connector %q does not exist, skipping", name))
					continue
				}
				if err := connectorError(e, name); err != nil {
					return err
				}
			}
			return nil
		}), nil
	}
	return nil, pgwire.NotSupported("%s statements of this form are not supported", st.Kind)
}

// showConnectors lists the connectors the caller may DESCRIBE, by name.
func (s *session) showConnectors(m *connect.Manager) pgwire.Statement {
	q := &listing{run: func(ctx context.Context) ([][]any, error) {
		if s.next.TxStatus() == 'E' {
			return nil, pgwire.Errorf(pgwire.CodeInFailedSQLTransaction, "current transaction is aborted, commands ignored until end of transaction block")
		}
		if err := s.sync(ctx); err != nil {
			return nil, err
		}
		conns, e := m.Visible(s.caller())
		if e != nil {
			return nil, connectorError(e, "")
		}
		out := make([][]any, 0, len(conns))
		for _, c := range conns {
			st := m.Status(c)
			row := []any{c.Name, c.Config["connector.class"], string(st.Type), st.Connector.State, nil, st.Connector.WorkerID, nil}
			if len(st.Tasks) > 0 {
				row[4] = st.Tasks[0].State
				if st.Tasks[0].Trace != "" {
					row[6] = st.Tasks[0].Trace
				}
			}
			out = append(out, row)
		}
		return out, nil
	}}
	for _, c := range connectorColumns {
		q.cols = append(q.cols, pgwire.Column{Name: c, Type: pgtype.TextOID, TypeSize: -1, TypeMod: -1})
	}
	return q
}

// caller is the session as connect.Manager asks it: its principal, the
// owner of what it creates, authorized on CONNECTOR resources as the
// REST API's callers are.
func (s *session) caller() connect.Caller {
	return connect.Caller{Principal: s.who.Principal.String(), Authorize: func(op acl.Operation, name string) *connect.Error {
		if op == kmsg.ACLOperationCreate {
			if ok, err := s.may(op, kmsg.ACLResourceTypeCluster, acl.ClusterName); err == nil && ok {
				return nil
			}
		}
		err := s.require(op, acl.ResourceTypeConnector, name, fmt.Sprintf("connector %q", name))
		if err == nil {
			return nil
		}
		status := http.StatusForbidden
		if _, cannot := s.may(op, acl.ResourceTypeConnector, name); cannot != nil {
			// Not a refusal: a listing must fail, not leave the
			// connector out.
			status = http.StatusServiceUnavailable
		}
		// The PostgreSQL error rides along, for connectorError.
		return &connect.Error{Status: status, Message: err.Error(), Err: err}
	}, Filter: func(op acl.Operation, name string) *connect.Error {
		ok, err := s.may(op, acl.ResourceTypeConnector, name)
		switch {
		case err != nil:
			return &connect.Error{Status: http.StatusServiceUnavailable, Message: err.Error()}
		case !ok:
			return &connect.Error{Status: http.StatusForbidden, Message: fmt.Sprintf("%v may not %v connector %q", s.who.Principal, op, name)}
		}
		return nil
	}}
}

// connectorName is a connector's name: one identifier, unqualified
// (connectors live in no schema).
func connectorName(parts []*pg.Node) (string, error) {
	if len(parts) != 1 || parts[0].GetString_() == nil {
		return "", pgwire.Errorf(codeInvalidName, "a connector's name is one identifier, not qualified")
	}
	name := parts[0].GetString_().Sval
	if msg := meta.ValidConnectorName(name); msg != "" {
		return "", pgwire.Errorf(codeInvalidName, "%s", msg)
	}
	return name, nil
}

// connectorOptions reads a connector's option list: keys as written
// (parse.OptionKey), each once, values as text. A key set to NONE (in
// ALTER, mayUnset) is removed from the config.
func connectorOptions(st parse.Statement, defs []*pg.Node, mayUnset bool) (set map[string]string, unset []string, err error) {
	set = make(map[string]string, len(defs))
	seen := make(map[string]bool, len(defs))
	for _, d := range defs {
		de := d.GetDefElem()
		if de == nil {
			return nil, nil, pgwire.Errorf(pgwire.CodeSyntaxError, "a connector's option is 'key' = 'value'")
		}
		key, pos := parse.OptionKey(st, de), de.Location+1
		if seen[key] {
			return nil, nil, &pgwire.Error{Code: pgwire.CodeSyntaxError, Message: fmt.Sprintf("option %q specified more than once", key), Position: pos}
		}
		seen[key] = true
		if de.Arg == nil && mayUnset {
			unset = append(unset, key)
			continue
		}
		val, ok := optionValue(de.Arg)
		if !ok {
			return nil, nil, &pgwire.Error{Code: pgwire.CodeInvalidParameterValue, Message: fmt.Sprintf("option %q needs a value: a string or a number", key), Position: pos}
		}
		set[key] = val
	}
	return set, unset, nil
}

// connectorError is Connect's refusal e as PostgreSQL's error; nil for
// nil.
func connectorError(e *connect.Error, name string) error {
	if e == nil {
		return nil
	}
	var pe *pgwire.Error
	if errors.As(e, &pe) {
		return pe
	}
	switch e.Status {
	case http.StatusConflict:
		return pgwire.Errorf(sqlerr.DuplicateObject, "connector %q already exists", name)
	case http.StatusNotFound:
		return pgwire.Errorf(pgwire.CodeUndefinedObject, "connector %q does not exist", name)
	case http.StatusForbidden:
		return pgwire.Errorf(pgwire.CodeInsufficientPrivilege, "%s", e.Message)
	case http.StatusUnauthorized:
		return pgwire.Errorf(pgwire.CodeInvalidAuthorization, "%s", e.Message)
	case http.StatusBadRequest:
		if e.Err != nil && !errors.Is(e.Err, connect.ErrMaskedUnknown) {
			// The class's own message, without the REST
			// endpoint Connect's wording points to.
			return pgwire.Errorf(pgwire.CodeInvalidParameterValue, "invalid configuration for connector %q: %v", name, e.Err)
		}
		return pgwire.Errorf(pgwire.CodeInvalidParameterValue, "%s", strings.TrimSpace(e.Message))
	}
	if errors.Is(e, meta.ErrNotAtLevel) {
		return &pgwire.Error{Code: pgwire.CodeObjectNotInPrerequisiteState, Message: e.Message,
			Hint: fmt.Sprintf("strand features upgrade --feature %s=%d", meta.FeatureMetadata, meta.MetadataLevel8)}
	}
	return pgwire.Errorf(pgwire.CodeInternalError, "%s", e.Message)
}
