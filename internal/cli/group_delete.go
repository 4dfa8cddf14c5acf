// `group delete`: delete groups and their committed offsets, one status
// line per group.

package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newGroupDeleteCmd(opts *ClientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP...",
		Short: "Delete groups and their committed offsets",
		Long: "Delete groups and their committed offsets. A group with active members cannot be\n" +
			"deleted (NON_EMPTY_GROUP). Each group's result is printed; the command fails if any failed.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			groups := uniq(args)
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			// A shard error leaves the groups of the failed coordinator
			// out of resps; they are reported per group below.
			resps, delErr := adm.DeleteGroups(ctx, groups...)
			t := newTable(cmd.OutOrStdout(), "GROUP", "STATUS")
			failed := 0
			for _, g := range groups {
				status := "OK"
				r, ok := resps[g]
				switch {
				case !ok && delErr != nil:
					status = "error: " + delErr.Error()
				case !ok:
					status = "missing from the broker's response"
				case r.Err != nil:
					status = errText(r.Err, r.ErrMessage)
				}
				if status != "OK" {
					failed++
				}
				t.row(g, status)
			}
			if err := t.flush(); err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%w: delete: %d of %d groups failed", ErrPartialFailure, failed, len(groups))
			}
			return nil
		},
	}
}
