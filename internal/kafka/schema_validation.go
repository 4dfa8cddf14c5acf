package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/schemareg/validate"
)

// Produce to a topic with confluent.key.schema.validation or
// confluent.value.schema.validation on, as Confluent Server does it:
// each key (value) of the batch must carry a schema id registered
// under the subject the topic's strategy names, and here also decode
// with that schema (package schemareg/validate). A batch with a refused
// record is INVALID_RECORD for its partition, with Kafka's per-record
// errors (ErrorRecords, v8+) and message, and nothing of it is stored;
// the request's other partitions go on. Topics without validation do
// no per-record work.
//
// The four configs are stored from strand.metadata.version 6, the
// level of the schema registry's records: below it no schema can be
// registered, and an agent of an older build would store the configs
// without acting on them, so CreateTopics and (Incremental)AlterConfigs
// refuse them with INVALID_CONFIG.

// SchemaValidator checks produced batches against the schema registry
// (*validate.Validator).
type SchemaValidator interface {
	Batch(ctx context.Context, p validate.Policy, batch []byte) ([]validate.RecordError, error)
}

// schemaConfigs are the topic configs of schema validation.
var schemaConfigs = []string{
	"confluent.key.schema.validation",
	"confluent.key.subject.name.strategy",
	"confluent.value.schema.validation",
	"confluent.value.subject.name.strategy",
}

// checkSchemaConfigLevel refuses setting the schema validation configs
// in set below metadata level 6.
func checkSchemaConfigLevel(view *meta.View, set map[string]string) (*kerr.Error, string) {
	var named string
	for _, n := range schemaConfigs {
		if _, ok := set[n]; ok {
			named = n
			break
		}
	}
	if named == "" {
		return nil, ""
	}
	f, err := view.Features()
	if err != nil {
		return kerr.UnknownServerError, err.Error()
	}
	if level := f.MetadataLevel(); level < meta.MetadataLevel6 {
		return kerr.InvalidConfig, fmt.Sprintf("%s needs the schema registry, stored from %s %d; the log is at %d (strand features upgrade raises it).",
			named, meta.FeatureMetadata, meta.MetadataLevel6, level)
	}
	return nil, ""
}

// checkSchemas validates a partition's batch for tt when its topic asks
// for it, filling sp's ErrorRecords for refused records. An error is a
// missing validator (a wiring bug, which closes the connection).
func checkSchemas(ctx context.Context, d *Deps, sp *kmsg.ProduceResponseTopicPartition, version int16, topic string, tt produceTopic, batch []byte) (*kerr.Error, string, error) {
	p := validate.PolicyOf(topic, tt.cfg)
	if !p.On() {
		return nil, "", nil
	}
	if d.Schemas == nil {
		return nil, "", fmt.Errorf("%w: Schemas (topic %q validates schemas)", ErrMissingDeps, topic)
	}
	refused, err := d.Schemas.Batch(ctx, p, batch)
	switch {
	case errors.Is(err, validate.ErrUnavailable):
		return syncErrCode(err), "could not read the schema registry: " + err.Error(), nil
	case err != nil:
		return codeOf(recordbatch.ErrorCode(err)), err.Error(), nil
	case len(refused) == 0:
		return nil, "", nil
	}
	errs := make([]recordError, len(refused))
	for i, r := range refused {
		errs[i] = recordError{index: r.Index, message: r.Message}
	}
	return kerr.InvalidRecord, refuseRecords(sp, version, errs), nil
}

// recordError is one record refused, by its index in the batch.
type recordError struct {
	index   int32
	message string
}

// refuseRecords fills sp's ErrorRecords (v8+) for refused records and
// returns the partition's message, in Kafka's words
// (RecordValidationException's).
func refuseRecords(sp *kmsg.ProduceResponseTopicPartition, version int16, errs []recordError) string {
	if version >= 8 {
		for _, e := range errs {
			er := kmsg.NewProduceResponseTopicPartitionErrorRecord()
			er.RelativeOffset, er.ErrorMessage = e.index, kmsg.StringPtr(e.message)
			sp.ErrorRecords = append(sp.ErrorRecords, er)
		}
	}
	shown := make([]string, 0, 3)
	for _, e := range errs[:min(len(errs), 3)] {
		shown = append(shown, fmt.Sprintf("RecordError(batchIndex=%d, message='%s')", e.index, e.message))
	}
	return fmt.Sprintf("One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: [%s]",
		len(errs), strings.Join(shown, ", "))
}
