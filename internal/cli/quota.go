// The `quota` command: client quotas (KIP-546), in the manner of
// Kafka's kafka-client-quotas and kafka-configs --entity-type
// users/clients tools, through DescribeClientQuotas and
// AlterClientQuotas. An entity is a user, a client id or both; the name
// "<default>" stands for Kafka's default entity (a null name on the
// wire).

package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// quotaDefaultName is how the command line names a default entity.
const quotaDefaultName = "<default>"

// NewQuotaCommand returns `strand quota`.
func NewQuotaCommand() *cobra.Command {
	opts := new(ClientOptions)
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Describe and alter client quotas (KIP-546)",
		Long: "Describe and alter client quotas: producer_byte_rate, consumer_byte_rate and\n" +
			"request_percentage of a user, a client id or a user's client id. The name\n" +
			quotaDefaultName + " is the default entity, which bounds each user (or client id) that\n" +
			"has no quota of its own. For example:\n\n" +
			"    strand quota alter --client-id ingest --set producer_byte_rate=1048576\n" +
			"    strand quota alter --user '" + quotaDefaultName + "' --set consumer_byte_rate=10485760\n" +
			"    strand quota describe --user alice",
	}
	opts.Register(cmd.PersistentFlags())
	cmd.AddCommand(newQuotaDescribeCmd(opts), newQuotaAlterCmd(opts))
	return cmd
}

// quotaEntityFlags are --user and --client-id, each optional.
type quotaEntityFlags struct {
	user, clientID string
}

func (f *quotaEntityFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.user, "user", "", "user name, or "+quotaDefaultName)
	cmd.Flags().StringVar(&f.clientID, "client-id", "", "client id, or "+quotaDefaultName)
}

// parts lists the entity's parts, user first, each with its name (nil
// for <default>).
func (f *quotaEntityFlags) parts(cmd *cobra.Command) []kadm.ClientQuotaEntityComponent {
	var ps []kadm.ClientQuotaEntityComponent
	for _, p := range []struct{ flag, typ, val string }{{"user", "user", f.user}, {"client-id", "client-id", f.clientID}} {
		if !cmd.Flags().Changed(p.flag) {
			continue
		}
		c := kadm.ClientQuotaEntityComponent{Type: p.typ}
		if p.val != quotaDefaultName {
			v := p.val
			c.Name = &v
		}
		ps = append(ps, c)
	}
	return ps
}

// QuotaListing is one entity of `quota describe --format json|yaml`
// with its quotas.
type QuotaListing struct {
	Entity []QuotaEntityPart `json:"entity" yaml:"entity"`
	Values []QuotaValue      `json:"values" yaml:"values"`
}

// QuotaEntityPart is a user or client-id part of an entity; Name is null
// for the default entity (<default> in text).
type QuotaEntityPart struct {
	Type string  `json:"type" yaml:"type"`
	Name *string `json:"name" yaml:"name"`
}

// QuotaValue is one quota of an entity.
type QuotaValue struct {
	Key   string  `json:"key" yaml:"key"`
	Value float64 `json:"value" yaml:"value"`
}

func newQuotaDescribeCmd(opts *ClientOptions) *cobra.Command {
	var ent quotaEntityFlags
	var strict bool
	var format *string
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "List client quotas, all or those of an entity",
		Long: "List client quotas, one row per entity and key. --user and --client-id narrow\n" +
			"the list to entities with that part; --strict to entities with no other part.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := CheckOutputFormat(*format); err != nil {
				return err
			}
			var comps []kadm.DescribeClientQuotaComponent
			for _, p := range ent.parts(cmd) {
				c := kadm.DescribeClientQuotaComponent{Type: p.Type, MatchName: p.Name, MatchType: kmsg.QuotasMatchTypeExact}
				if p.Name == nil {
					c.MatchType = kmsg.QuotasMatchTypeDefault
				}
				comps = append(comps, c)
			}
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			qs, err := adm.DescribeClientQuotas(ctx, strict, comps)
			if err != nil {
				return fmt.Errorf("describe client quotas: %w", err)
			}
			listing := make([]QuotaListing, 0, len(qs))
			for _, q := range qs {
				l := QuotaListing{Values: []QuotaValue{}}
				for _, c := range q.Entity {
					l.Entity = append(l.Entity, QuotaEntityPart{Type: c.Type, Name: c.Name})
				}
				for _, v := range q.Values {
					l.Values = append(l.Values, QuotaValue{Key: v.Key, Value: v.Value})
				}
				listing = append(listing, l)
			}
			return WriteOutput(cmd.OutOrStdout(), *format, listing, func(w io.Writer) error {
				t := newTable(w, "USER", "CLIENT-ID", "KEY", "VALUE")
				for _, q := range qs {
					user, client := "-", "-"
					for _, c := range q.Entity {
						name := quotaDefaultName
						if c.Name != nil {
							name = *c.Name
						}
						switch c.Type {
						case "user":
							user = name
						case "client-id":
							client = name
						}
					}
					for _, v := range q.Values {
						t.row(user, client, v.Key, strconv.FormatFloat(v.Value, 'f', -1, 64))
					}
				}
				return t.flush()
			})
		},
	}
	format = addOutputFlag(cmd)
	ent.register(cmd)
	cmd.Flags().BoolVar(&strict, "strict", false, "only entities with no parts besides --user and --client-id")
	return cmd
}

func newQuotaAlterCmd(opts *ClientOptions) *cobra.Command {
	var ent quotaEntityFlags
	var set, remove []string
	var validate bool
	cmd := &cobra.Command{
		Use:   "alter",
		Short: "Set and remove client quotas of one entity",
		Long: "Set (--set key=value) and remove (--remove key) client quotas of the entity that\n" +
			"--user and --client-id name. --validate-only checks without changing anything.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			entity := kadm.ClientQuotaEntity(ent.parts(cmd))
			if len(entity) == 0 {
				return fmt.Errorf("%w: name an entity with --user, --client-id or both", ErrUsage)
			}
			var ops []kadm.AlterClientQuotaOp
			for _, kv := range set {
				k, v, ok := strings.Cut(kv, "=")
				f, err := strconv.ParseFloat(v, 64)
				if !ok || k == "" || err != nil {
					return fmt.Errorf("%w: --set %q is not key=number", ErrUsage, kv)
				}
				ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: f})
			}
			for _, k := range remove {
				ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
			}
			if len(ops) == 0 {
				return fmt.Errorf("%w: nothing to change: give --set or --remove", ErrUsage)
			}
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			alter := adm.AlterClientQuotas
			if validate {
				alter = adm.ValidateAlterClientQuotas
			}
			res, err := alter(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: ops}})
			if err != nil {
				return fmt.Errorf("alter client quotas: %w", err)
			}
			for _, r := range res {
				if r.Err != nil {
					return fmt.Errorf("alter client quotas of %v: %w: %s", r.Entity, r.Err, r.ErrMessage)
				}
			}
			verb := "altered"
			if validate {
				verb = "valid"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %v\n", verb, entity)
			return nil
		},
	}
	ent.register(cmd)
	cmd.Flags().StringArrayVar(&set, "set", nil, "quota to set, key=value (repeatable)")
	cmd.Flags().StringArrayVar(&remove, "remove", nil, "quota key to remove (repeatable)")
	cmd.Flags().BoolVar(&validate, "validate-only", false, "check the change without making it")
	return cmd
}
