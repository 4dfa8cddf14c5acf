package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strandkafka/strand/internal/agent"
)

// ErrDamage reports that `storage verify` found damaged data objects;
// the command exits non-zero after printing them.
var ErrDamage = errors.New("damaged data objects found")

// defaultVerifyRate is --rate's default, the agent's own default pace.
const defaultVerifyRate = "16MiB"

// NewStorageCommand returns `strand storage`: checks of the object store
// against the offset index, through one agent's HTTP address.
func NewStorageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "storage",
		Short: "Check the object store against the offset index (through an agent's HTTP address)",
	}
	cmd.AddCommand(newStorageVerifyCommand())
	return cmd
}

func newStorageVerifyCommand() *cobra.Command {
	var (
		o    adminOptions
		rate string
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check that every data object the index points at exists and its batches verify",
		Long: `Check that every data object the offset index points at exists in the
object store and that every indexed batch in it verifies (framing, CRC-32C,
record counts against the index), reading at most --rate bytes a second.
The agent at --http does the walk over its copy of the index, which every
agent holds whole, and answers when it is done; interrupting the command
stops the walk.

It lists each damaged object, missing or corrupt, with the partitions and
offset ranges it holds, and exits non-zero if it found any.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			bps, err := parseByteRate(rate)
			if err != nil {
				return fmt.Errorf("%w: --rate: %v", ErrUsage, err)
			}
			var rep agent.StorageVerifyReport
			if err := o.do(cmd.Context(), http.MethodPost, agent.PathStorageVerify, agent.StorageVerifyRequest{BytesPerSecond: bps}, &rep); err != nil {
				return err
			}
			if o.JSON {
				err = printJSON(cmd.OutOrStdout(), rep)
			} else {
				err = printVerifyReport(cmd.OutOrStdout(), rep)
			}
			if err != nil {
				return err
			}
			if rep.DamagedObjects > 0 {
				return fmt.Errorf("%w: %d (%d missing, %d corrupt)", ErrDamage, rep.DamagedObjects, rep.Missing, rep.Corrupt)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&rate, "rate", defaultVerifyRate, "bytes read from the object store per second, e.g. 4MiB, 500KiB, 1GiB or a number of bytes")
	o.register(cmd.Flags(), 0)
	return cmd
}

func printVerifyReport(w io.Writer, rep agent.StorageVerifyReport) error {
	fmt.Fprintf(w, "checked %d partitions: %d index entries, %s, in %v\n",
		rep.Partitions, rep.Entries, byteSize(rep.Bytes), rep.DurationNS.Round(time.Millisecond))
	if rep.DamagedObjects == 0 {
		fmt.Fprintln(w, "no damage found")
		return nil
	}
	fmt.Fprintf(w, "damaged objects: %d (%d missing, %d corrupt)", rep.DamagedObjects, rep.Missing, rep.Corrupt)
	if n := rep.DamagedObjects - len(rep.Damaged); n > 0 {
		fmt.Fprintf(w, ", %d not listed", n)
	}
	fmt.Fprint(w, "\n\n")
	t := newTable(w, "OBJECT", "KIND", "TOPIC", "PARTITION", "OFFSETS")
	for _, d := range rep.Damaged {
		for i, r := range d.Ranges {
			key, kind := d.Key, d.Kind
			if i > 0 {
				key, kind = "", ""
			}
			t.row(key, kind, r.Topic, r.Partition, fmt.Sprintf("%d-%d", r.FirstOffset, r.LastOffset))
		}
		if d.MoreRanges > 0 {
			t.row("", "", fmt.Sprintf("(%d more ranges)", d.MoreRanges), "", "")
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, d := range rep.Damaged {
		fmt.Fprintf(w, "%s: %s\n", d.Key, d.Error)
	}
	return nil
}

// parseByteRate reads a byte count with an optional binary unit (KiB,
// MiB, GiB; B or none for bytes). It must be positive.
func parseByteRate(s string) (int64, error) {
	s = strings.TrimSpace(s)
	num, mult := s, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a positive byte count (e.g. 16MiB)", s)
	}
	return n * mult, nil
}
