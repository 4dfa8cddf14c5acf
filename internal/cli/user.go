// The `user` command: SCRAM users through AlterUserScramCredentials and
// DescribeUserScramCredentials (KIP-554), as Kafka's kafka-configs
// --entity-type users does. kadm salts the password on this side; only
// the salt and the salted password travel, and the cluster keeps only
// the keys derived from them. A password is read from
// STRAND_USER_PASSWORD or --password-file, never a flag: a command line
// is visible to every user of the machine.

package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// EnvUserPassword names the environment variable `user create` reads
// the new user's password from.
const EnvUserPassword = "STRAND_USER_PASSWORD"

// ErrUnknownUser reports a user without SCRAM credentials.
var ErrUnknownUser = errors.New("unknown user")

var scramMechanisms = map[string]kadm.ScramMechanism{
	"SCRAM-SHA-256": kadm.ScramSha256,
	"SCRAM-SHA-512": kadm.ScramSha512,
}

// parseMechanisms turns --mechanism values into kadm's; none means both.
func parseMechanisms(names []string) ([]kadm.ScramMechanism, error) {
	if len(names) == 0 {
		return []kadm.ScramMechanism{kadm.ScramSha256, kadm.ScramSha512}, nil
	}
	var out []kadm.ScramMechanism
	for _, n := range names {
		m, ok := scramMechanisms[strings.ToUpper(strings.TrimSpace(n))]
		if !ok {
			return nil, fmt.Errorf("%w: --mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", ErrUsage, n)
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out, nil
}

// NewUserCommand returns `user` with its create, delete and list
// subcommands.
func NewUserCommand() *cobra.Command {
	var opts ClientOptions
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Create, delete and list SCRAM users (SASL credentials)",
		Args:  cobra.NoArgs,
	}
	opts.Register(cmd.PersistentFlags())
	cmd.AddCommand(newUserCreateCmd(&opts), newUserDeleteCmd(&opts), newUserListCmd(&opts))
	return cmd
}

func newUserCreateCmd(opts *ClientOptions) *cobra.Command {
	var (
		mechanisms   []string
		iterations   int32
		passwordFile string
	)
	cmd := &cobra.Command{
		Use:   "create USER",
		Short: "Create a SCRAM user, or set its password (env " + EnvUserPassword + " or --password-file)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mechs, err := parseMechanisms(mechanisms)
			if err != nil {
				return err
			}
			password, err := readPassword(passwordFile)
			if err != nil {
				return err
			}
			var ups []kadm.UpsertSCRAM
			for _, m := range mechs {
				ups = append(ups, kadm.UpsertSCRAM{User: args[0], Mechanism: m, Iterations: iterations, Password: password})
			}
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			res, err := adm.AlterUserSCRAMs(ctx, nil, ups)
			if err != nil {
				return fmt.Errorf("create user %s: %w", args[0], err)
			}
			if err := res.Error(); err != nil {
				return fmt.Errorf("create user %s: %w%s", args[0], err, withMessage(res[args[0]].ErrMessage))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "user %s: %s set\n", args[0], mechanismNames(mechs))
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&mechanisms, "mechanism", nil, "SCRAM-SHA-256 and/or SCRAM-SHA-512 (default: both)")
	cmd.Flags().Int32Var(&iterations, "iterations", 8192, "SCRAM iterations, 4096 to 16384")
	cmd.Flags().StringVar(&passwordFile, "password-file", "", "file holding the new user's password (first line); else $"+EnvUserPassword)
	return cmd
}

func newUserDeleteCmd(opts *ClientOptions) *cobra.Command {
	var mechanisms []string
	cmd := &cobra.Command{
		Use:   "delete USER",
		Short: "Delete a user's SCRAM credentials (all of them unless --mechanism)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			user := args[0]
			var mechs []kadm.ScramMechanism
			if len(mechanisms) > 0 {
				var err error
				if mechs, err = parseMechanisms(mechanisms); err != nil {
					return err
				}
			}
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if mechs == nil {
				described, err := adm.DescribeUserSCRAMs(ctx, user)
				if err != nil {
					return fmt.Errorf("delete user %s: %w", user, err)
				}
				d := described[user]
				if errors.Is(d.Err, kerr.ResourceNotFound) {
					return fmt.Errorf("%w: %s", ErrUnknownUser, user)
				}
				if d.Err != nil {
					return fmt.Errorf("delete user %s: %w", user, d.Err)
				}
				for _, ci := range d.CredInfos {
					mechs = append(mechs, ci.Mechanism)
				}
			}
			var dels []kadm.DeleteSCRAM
			for _, m := range mechs {
				dels = append(dels, kadm.DeleteSCRAM{User: user, Mechanism: m})
			}
			res, err := adm.AlterUserSCRAMs(ctx, dels, nil)
			if err != nil {
				return fmt.Errorf("delete user %s: %w", user, err)
			}
			if err := res.Error(); err != nil {
				if errors.Is(err, kerr.ResourceNotFound) {
					return fmt.Errorf("%w: %s has no %s credential", ErrUnknownUser, user, mechanismNames(mechs))
				}
				return fmt.Errorf("delete user %s: %w%s", user, err, withMessage(res[user].ErrMessage))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "user %s: %s deleted\n", user, mechanismNames(mechs))
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&mechanisms, "mechanism", nil, "delete only these: SCRAM-SHA-256 and/or SCRAM-SHA-512")
	return cmd
}

// UserListing is one user of `user list --format json|yaml`: its SCRAM
// credentials' mechanisms and iterations, never a salt or key.
type UserListing struct {
	User        string           `json:"user" yaml:"user"`
	Credentials []UserCredential `json:"credentials" yaml:"credentials"`
}

// UserCredential is one SCRAM credential of a user.
type UserCredential struct {
	Mechanism  string `json:"mechanism" yaml:"mechanism"`
	Iterations int32  `json:"iterations" yaml:"iterations"`
}

func newUserListCmd(opts *ClientOptions) *cobra.Command {
	var format *string
	cmd := &cobra.Command{
		Use:     "list [USER...]",
		Aliases: []string{"ls"},
		Short:   "List SCRAM users with their mechanisms and iterations (never a salt or key)",
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, ctx, done, err := opts.adminWithFormat(cmd.Context(), *format)
			if err != nil {
				return err
			}
			defer done()
			described, err := adm.DescribeUserSCRAMs(ctx, args...)
			if err != nil {
				return fmt.Errorf("list users: %w", err)
			}
			listing := []UserListing{}
			var missing []string
			for _, d := range described.Sorted() {
				if d.Err != nil {
					missing = append(missing, d.User)
					continue
				}
				u := UserListing{User: d.User, Credentials: []UserCredential{}}
				for _, ci := range d.CredInfos {
					u.Credentials = append(u.Credentials, UserCredential{Mechanism: ci.Mechanism.String(), Iterations: ci.Iterations})
				}
				listing = append(listing, u)
			}
			if err := WriteOutput(cmd.OutOrStdout(), *format, listing, func(w io.Writer) error {
				t := newTable(w, "USER", "MECHANISM", "ITERATIONS")
				for _, u := range listing {
					for _, c := range u.Credentials {
						t.row(u.User, c.Mechanism, c.Iterations)
					}
				}
				return t.flush()
			}); err != nil {
				return err
			}
			if len(missing) > 0 {
				return fmt.Errorf("%w: %s", ErrUnknownUser, strings.Join(missing, ", "))
			}
			return nil
		},
	}
	format = addOutputFlag(cmd)
	return cmd
}

// readPassword is the first line of file, else $STRAND_USER_PASSWORD.
func readPassword(file string) (string, error) {
	if file == "" {
		if p := os.Getenv(EnvUserPassword); p != "" {
			return p, nil
		}
		return "", fmt.Errorf("%w: give the password in $%s or --password-file", ErrUsage, EnvUserPassword)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%w: --password-file: %v", ErrUsage, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimRight(line, "\r"); line == "" {
		return "", fmt.Errorf("%w: --password-file %s holds no password", ErrUsage, file)
	}
	return line, nil
}

func mechanismNames(ms []kadm.ScramMechanism) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.String())
	}
	return strings.Join(s, ", ")
}

func withMessage(msg string) string {
	if msg == "" {
		return ""
	}
	return " (" + msg + ")"
}
