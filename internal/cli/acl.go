package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
)

// NewACLCommand returns `acl` with its create, list and delete
// subcommands: Kafka's kafka-acls.sh --add, --list and --remove, through
// CreateAcls, DescribeAcls and DeleteAcls.
func NewACLCommand() *cobra.Command {
	var opts ClientOptions
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Create, list and delete ACLs",
		Long: "Create, list and delete ACLs. An agent enforces them only when it runs with\n" +
			"--authorizer standard; managing them needs Alter (create, delete) or Describe\n" +
			"(list) on the cluster, or a --super-users principal. --subject names a schema\n" +
			"registry subject (Strand's SUBJECT type, from strand.metadata.version 6): READ\n" +
			"reads it, WRITE registers under it, DELETE deletes, ALTER changes its config.\n" +
			"--relation names a SQL source, materialized view or sink (Strand's RELATION type,\n" +
			"from strand.metadata.version 7): CREATE creates it (or CREATE on --cluster), READ\n" +
			"selects from or subscribes to it, DELETE drops it. --connector names a connector of\n" +
			"the Connect REST API (Strand's CONNECTOR type, from strand.metadata.version 8):\n" +
			"CREATE creates it (or CREATE on --cluster), DESCRIBE sees it, ALTER changes, pauses,\n" +
			"resumes or restarts it, DELETE deletes it.",
		Args: cobra.NoArgs,
	}
	opts.Register(cmd.PersistentFlags())
	cmd.AddCommand(newACLCreateCmd(&opts), newACLListCmd(&opts), newACLDeleteCmd(&opts))
	return cmd
}

// aclFlags are the flags that name ACLs, shared by the subcommands.
type aclFlags struct {
	topics, groups, txnIDs []string
	// subjects are SUBJECT resources, relations RELATION resources
	// (acl_subject.go).
	subjects, relations   []string
	connectors            []string
	cluster               bool
	pattern               string
	operations            []string
	allow, deny           []string
	allowHosts, denyHosts []string
	// permissions filters list and delete: allow, deny.
	permissions []string
}

func (f *aclFlags) register(fs *pflag.FlagSet, create bool) {
	fs.StringArrayVar(&f.topics, "topic", nil, "topic resource (repeatable)")
	fs.StringArrayVar(&f.groups, "group", nil, "consumer group resource (repeatable)")
	fs.StringArrayVar(&f.txnIDs, "transactional-id", nil, "transactional id resource (repeatable)")
	fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	fs.StringArrayVar(&f.subjects, "subject", nil, "schema registry subject resource (repeatable)")
	fs.StringArrayVar(&f.relations, "relation", nil, "SQL relation resource: a source, materialized view or sink (repeatable)")
	fs.StringArrayVar(&f.connectors, "connector", nil, "connector resource of the Connect REST API (repeatable)")
	fs.StringArrayVar(&f.operations, "operation", nil, "operation: all, read, write, create, delete, alter, describe, cluster-action,\ndescribe-configs, alter-configs or idempotent-write (repeatable)")
	if create {
		fs.StringVar(&f.pattern, "resource-pattern-type", "literal", "literal or prefixed")
		fs.StringArrayVar(&f.allow, "allow-principal", nil, "principal allowed, as User:alice (repeatable)")
		fs.StringArrayVar(&f.deny, "deny-principal", nil, "principal denied, as User:alice (repeatable)")
		fs.StringArrayVar(&f.allowHosts, "allow-host", []string{"*"}, "client address the allows apply to (repeatable)")
		fs.StringArrayVar(&f.denyHosts, "deny-host", []string{"*"}, "client address the denies apply to (repeatable)")
		return
	}
	fs.StringVar(&f.pattern, "resource-pattern-type", "any", "any, match (every pattern that applies to the named resources), literal or prefixed")
	fs.StringArrayVar(&f.allow, "principal", nil, "only ACLs of this principal (repeatable)")
	fs.StringArrayVar(&f.allowHosts, "host", nil, "only ACLs of this client address (repeatable)")
	fs.StringArrayVar(&f.permissions, "permission", nil, "only allow or deny ACLs")
}

func (f *aclFlags) ops(create bool) ([]kadm.ACLOperation, error) {
	if len(f.operations) == 0 {
		if create {
			return nil, fmt.Errorf("%w: --operation is required", ErrUsage)
		}
		return []kadm.ACLOperation{kadm.OpAny}, nil
	}
	var ops []kadm.ACLOperation
	for _, s := range f.operations {
		op, err := kmsg.ParseACLOperation(s)
		if err != nil || op == kmsg.ACLOperationUnknown || (create && op == kmsg.ACLOperationAny) {
			return nil, fmt.Errorf("%w: --operation %q", ErrUsage, s)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// resources adds the named resources to b; false if none was named.
func (f *aclFlags) resources(b *kadm.ACLBuilder) bool {
	b.MaybeTopics(f.topics...).MaybeGroups(f.groups...).MaybeTransactionalIDs(f.txnIDs...).MaybeClusters(f.cluster)
	return len(f.topics)+len(f.groups)+len(f.txnIDs) > 0 || f.cluster
}

// aclCreation is what `acl create` sends: kadm's builder for Kafka's
// resource types (when kafka), and the SUBJECT ones from the flags.
type aclCreation struct {
	b       *kadm.ACLBuilder
	kafka   bool
	ops     []kadm.ACLOperation
	pattern kadm.ACLPattern
}

// createBuilder is the builder of `acl create`.
func (f *aclFlags) createBuilder() (aclCreation, error) {
	b := kadm.NewACLs()
	kafkaTypes := f.resources(b)
	if !kafkaTypes && f.strandNamed() == 0 {
		return aclCreation{}, fmt.Errorf("%w: name a resource (--topic, --group, --transactional-id, --cluster, --subject, --relation or --connector)", ErrUsage)
	}
	if len(f.allow)+len(f.deny) == 0 {
		return aclCreation{}, fmt.Errorf("%w: name a principal (--allow-principal or --deny-principal)", ErrUsage)
	}
	ops, err := f.ops(true)
	if err != nil {
		return aclCreation{}, err
	}
	pattern, err := kmsg.ParseACLResourcePatternType(f.pattern)
	if err != nil || (pattern != kadm.ACLPatternLiteral && pattern != kadm.ACLPatternPrefixed) {
		return aclCreation{}, fmt.Errorf("%w: --resource-pattern-type %q: want literal or prefixed", ErrUsage, f.pattern)
	}
	// Hosts only on a side with principals, as kadm insists.
	if len(f.allow) > 0 {
		b.MaybeAllow(f.allow...).MaybeAllowHosts(f.allowHosts...)
	}
	if len(f.deny) > 0 {
		b.MaybeDeny(f.deny...).MaybeDenyHosts(f.denyHosts...)
	}
	return aclCreation{b: b.Operations(ops...).ResourcePatternType(pattern), kafka: kafkaTypes, ops: ops, pattern: pattern}, nil
}

// aclFilters are what `acl list` and `acl delete` send: kadm's builder
// for Kafka's resource types (nil when only subjects are named), and
// the SUBJECT filters.
type aclFilters struct {
	b        *kadm.ACLBuilder
	subjects []acl.Filter
}

// filterBuilder is the builder of `acl list` and `acl delete`: unset
// flags match anything (every type, SUBJECT included, when no resource
// is named).
func (f *aclFlags) filterBuilder() (aclFilters, error) {
	b := kadm.NewACLs()
	kafkaTypes := f.resources(b)
	if !kafkaTypes && f.strandNamed() == 0 {
		b.AnyResource()
		kafkaTypes = true
	}
	ops, err := f.ops(false)
	if err != nil {
		return aclFilters{}, err
	}
	pattern, err := kmsg.ParseACLResourcePatternType(f.pattern)
	if err != nil || pattern == kmsg.ACLResourcePatternTypeUnknown {
		return aclFilters{}, fmt.Errorf("%w: --resource-pattern-type %q", ErrUsage, f.pattern)
	}
	allow, deny := true, true
	for _, p := range f.permissions {
		switch strings.ToLower(p) {
		case "allow":
			deny = false
		case "deny":
			allow = false
		default:
			return aclFilters{}, fmt.Errorf("%w: --permission %q: want allow or deny", ErrUsage, p)
		}
	}
	out := aclFilters{subjects: f.subjectFilters(ops, pattern, allow, deny)}
	if !kafkaTypes {
		return out, nil
	}
	// kadm matches any principal or host for a side called with none,
	// and leaves out a side never called.
	if allow {
		b.Allow(f.allow...).AllowHosts(f.allowHosts...)
	}
	if deny {
		b.Deny(f.allow...).DenyHosts(f.allowHosts...)
	}
	out.b = b.Operations(ops...).ResourcePatternType(pattern)
	return out, nil
}

func newACLCreateCmd(opts *ClientOptions) *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create ACLs",
		Long: "Create an ACL for every combination of the principals, hosts, resources and\n" +
			"operations given, e.g.\n" +
			"  strand acl create --allow-principal User:alice --operation read --topic orders",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.createBuilder()
			if err != nil {
				return err
			}
			adm, cl, ctx, done, err := opts.aclClients(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			var res kadm.CreateACLsResults
			if c.kafka {
				if res, err = adm.CreateACLs(ctx, c.b); err != nil {
					return fmt.Errorf("create ACLs: %w", err)
				}
			}
			if f.strandNamed() > 0 {
				sres, err := f.createSubjectACLs(ctx, cl, c.ops, c.pattern)
				if err != nil {
					return fmt.Errorf("create SUBJECT/RELATION ACLs: %w", err)
				}
				res = append(res, sres...)
			}
			t := newTable(cmd.OutOrStdout(), aclHeaders("STATUS")...)
			failed := 0
			for _, r := range res {
				status := "OK"
				if r.Err != nil {
					status, failed = errText(r.Err, r.ErrMessage), failed+1
				}
				t.row(aclRow(r.Principal, r.Host, r.Type, r.Name, r.Pattern, r.Operation, r.Permission, status)...)
			}
			if err := t.flush(); err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%w: %d of %d ACLs not created", ErrPartialFailure, failed, len(res))
			}
			return nil
		},
	}
	f.register(cmd.Flags(), true)
	return cmd
}

func newACLListCmd(opts *ClientOptions) *cobra.Command {
	return newACLFilterCmd(opts, &cobra.Command{
		Use:   "list",
		Short: "List ACLs, all of them or those the flags select",
	}, false, describeSubjectACLs, func(ctx context.Context, adm *kadm.Client, b *kadm.ACLBuilder) ([]aclResult, error) {
		res, err := adm.DescribeACLs(ctx, b)
		out := make([]aclResult, len(res))
		for i, r := range res {
			out[i] = aclResult{err: r.Err, msg: r.ErrMessage, acls: r.Described}
		}
		return out, err
	})
}

func newACLDeleteCmd(opts *ClientOptions) *cobra.Command {
	return newACLFilterCmd(opts, &cobra.Command{
		Use:   "delete",
		Short: "Delete the ACLs the flags select",
		Long: "Delete the ACLs the flags select; unset flags match anything, so name at least a\n" +
			"resource or a principal. Each deleted ACL is printed.",
	}, true, deleteSubjectACLs, func(ctx context.Context, adm *kadm.Client, b *kadm.ACLBuilder) ([]aclResult, error) {
		res, err := adm.DeleteACLs(ctx, b)
		out := make([]aclResult, len(res))
		for i, r := range res {
			out[i] = aclResult{err: r.Err, msg: r.ErrMessage}
			for _, d := range r.Deleted {
				out[i].acls = append(out[i].acls, kadm.DescribedACL{Principal: d.Principal, Host: d.Host,
					Type: d.Type, Name: d.Name, Pattern: d.Pattern, Operation: d.Operation, Permission: d.Permission})
			}
		}
		return out, err
	})
}

// aclResult is one filter's answer: its error, or the ACLs it listed
// or deleted.
type aclResult struct {
	err  error
	msg  string
	acls []kadm.DescribedACL
}

// newACLFilterCmd makes cmd a command that sends the filter its flags
// build through do (the SUBJECT filters through subjects) and prints
// the ACLs they answer. narrow refuses a filter naming neither a
// resource nor a principal, which would match every ACL.
func newACLFilterCmd(opts *ClientOptions, cmd *cobra.Command, narrow bool,
	subjects func(context.Context, *kgo.Client, []acl.Filter) ([]aclResult, error),
	do func(context.Context, *kadm.Client, *kadm.ACLBuilder) ([]aclResult, error),
) *cobra.Command {
	var f aclFlags
	var format *string
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := CheckOutputFormat(*format); err != nil {
			return err
		}
		if narrow && len(f.topics)+len(f.groups)+len(f.txnIDs)+f.strandNamed()+len(f.allow) == 0 && !f.cluster {
			return fmt.Errorf("%w: name a resource or a --principal; unset flags match every ACL", ErrUsage)
		}
		filters, err := f.filterBuilder()
		if err != nil {
			return err
		}
		adm, cl, ctx, done, err := opts.aclClients(cmd.Context())
		if err != nil {
			return err
		}
		defer done()
		var res []aclResult
		if filters.b != nil {
			if res, err = do(ctx, adm, filters.b); err != nil {
				return fmt.Errorf("%s ACLs: %w", cmd.Name(), err)
			}
		}
		if len(filters.subjects) > 0 {
			sres, err := subjects(ctx, cl, filters.subjects)
			if err != nil {
				return fmt.Errorf("%s SUBJECT/RELATION ACLs: %w", cmd.Name(), err)
			}
			res = append(res, sres...)
		}
		var rows [][]any
		listing := []ACLListing{}
		for _, r := range res {
			if r.err != nil {
				return fmt.Errorf("%s ACLs: %s", cmd.Name(), errText(r.err, r.msg))
			}
			for _, d := range r.acls {
				row := aclRow(d.Principal, d.Host, d.Type, d.Name, d.Pattern, d.Operation, d.Permission)
				rows = append(rows, row)
				listing = append(listing, ACLListing{Principal: d.Principal, Host: d.Host, ResourceType: acl.ResourceTypeName(d.Type),
					ResourceName: d.Name, PatternType: d.Pattern.String(), Operation: d.Operation.String(), Permission: d.Permission.String()})
			}
		}
		slices.SortFunc(listing, func(a, b ACLListing) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		return WriteOutput(cmd.OutOrStdout(), *format, listing, func(io.Writer) error { return printACLRows(cmd, rows) })
	}
	f.register(cmd.Flags(), false)
	format = addOutputFlag(cmd)
	return cmd
}

// ACLListing is one ACL of `acl list` and `acl delete` with --format
// json|yaml, named as kafka-acls names the parts.
type ACLListing struct {
	Principal    string `json:"principal" yaml:"principal"`
	Host         string `json:"host" yaml:"host"`
	ResourceType string `json:"resource_type" yaml:"resource_type"`
	ResourceName string `json:"resource_name" yaml:"resource_name"`
	PatternType  string `json:"pattern_type" yaml:"pattern_type"`
	Operation    string `json:"operation" yaml:"operation"`
	Permission   string `json:"permission" yaml:"permission"`
}

func aclHeaders(extra ...string) []string {
	return append([]string{"PRINCIPAL", "HOST", "RESOURCE", "NAME", "PATTERN", "OPERATION", "PERMISSION"}, extra...)
}

func aclRow(principal, host string, typ kmsg.ACLResourceType, name string, pattern kadm.ACLPattern,
	op kadm.ACLOperation, perm kmsg.ACLPermissionType, extra ...any,
) []any {
	return append([]any{principal, host, acl.ResourceTypeName(typ), name, pattern, op, perm}, extra...)
}

// printACLRows prints rows sorted, so the output does not depend on the
// order filters were sent in.
func printACLRows(cmd *cobra.Command, rows [][]any) error {
	slices.SortFunc(rows, func(a, b []any) int { return strings.Compare(fmt.Sprint(a...), fmt.Sprint(b...)) })
	t := newTable(cmd.OutOrStdout(), aclHeaders()...)
	for _, r := range rows {
		t.row(r...)
	}
	return t.flush()
}
