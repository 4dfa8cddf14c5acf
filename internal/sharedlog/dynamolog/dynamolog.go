// Package dynamolog owns Strand's shared log on DynamoDB: a loglet per
// partition key of one table, and the MetaStore that keeps a VirtualLog's
// chain in an item of the same table. Only single-item conditional
// writes are used (DynamoDB-compatible test servers such as dynalite have
// no transactions); the ordering, ambiguity, seal and trim rules are
// slotlog's, and this package maps slots onto items.
//
// # Table layout
//
// One table, created on first use (on-demand billing) if missing:
//
//	partition key "log" (S)   sort key "pos" (N)   other attributes
//	log:<id>                  0, 1, 2, ...          kind ("entry"|"seal"), tok (B, 16),
//	                                                data (B, absent when empty), crc (N, CRC-32C of data)
//	log:<id>                  -1                    tp (N): the trim point
//	chain:<name>              0                     ver (N), chain (S, the encoded chain)
//
// A slot is written with PutItem and attribute_not_exists(pos), asking
// for the occupant on failure (ReturnValuesOnConditionCheckFailure); a
// server that does not return it is asked with a consistent GetItem.
//
// # Costs
//
// An append is one PutItem when it wins its slot; a lost race adds a
// failed put (and a GetItem where the occupant is not returned). The tail
// is a Query from the handle's known frontier (consistent, so it reads
// only items appended since) plus a GetItem of the trim point; a handle
// far behind adds one reverse Query of one item to jump. Items hold at
// most 400 KB, hence MaxEntryBytes. A log lives in one partition key, so
// it gets one partition's throughput (about 1,000 writes/s): batch
// entries above the log.
package dynamolog

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/sharedlog/slotlog"
)

const (
	defaultRegion = "us-east-1"
	// Window is the format's slot window (see slotlog.Config.Window):
	// every handle of a log must use it. Sixteen puts in flight already
	// exceed one partition's write rate at DynamoDB's latency.
	Window = 16
	// DefaultMaxEntryBytes keeps an item within DynamoDB's 400 KB limit
	// with room for the key (MaxLogIDBytes) and the other attributes.
	DefaultMaxEntryBytes = 400<<10 - 2<<10
	// MaxLogIDBytes bounds a log id, so the item overhead is bounded.
	MaxLogIDBytes = 1024
	// tableWait bounds the wait for a new table to become ACTIVE.
	tableWait = 2 * time.Minute
)

// Attribute names.
const (
	attrLog   = "log"
	attrPos   = "pos"
	attrKind  = "kind"
	attrToken = "tok"
	attrData  = "data"
	attrCRC   = "crc"
	attrTrim  = "tp"
	attrVer   = "ver"
	attrChain = "chain"
)

// Config says where the table is and how to reach the service.
type Config struct {
	// Table is the table's name; it is created if missing.
	Table string
	// Endpoint overrides the service URL, e.g. http://127.0.0.1:8000 for
	// dynalite. Empty: AWS.
	Endpoint string
	// Region; empty means the default chain's region, else us-east-1.
	Region string
	// AccessKeyID and SecretAccessKey (and optional SessionToken) are
	// static credentials. Empty: the SDK's default chain.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// HTTPClient replaces the SDK's HTTP client (tests inject faults).
	HTTPClient *http.Client
}

// Options tune one loglet handle. The zero value is the default.
type Options struct {
	// InFlight bounds concurrent slot writes; at most Window. Default
	// Window.
	InFlight int
	// MaxEntryBytes is the largest entry; default and maximum
	// DefaultMaxEntryBytes.
	MaxEntryBytes int
	// PutAttempts and RetryBackoff: see slotlog.Config.
	PutAttempts  int
	RetryBackoff time.Duration
	// TrimGrace: see slotlog.Config. Every handle of a log must agree.
	TrimGrace time.Duration
	// Clock: see slotlog.Config. Default clock.Real.
	Clock clock.Clock
}

// DB is a connection to one table. Safe for concurrent use.
type DB struct {
	client *dynamodb.Client
	table  string

	// ensureMu guards ensured: the table is checked (and created) once,
	// by the first operation that needs it.
	ensureMu sync.Mutex
	ensured  bool
}

// Connect builds a client from cfg and makes sure the table exists,
// creating it and waiting for it to become ACTIVE if needed.
func Connect(ctx context.Context, cfg Config) (*DB, error) {
	db, err := newDB(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := db.ensure(ctx); err != nil {
		return nil, err
	}
	return db, nil
}

// newDB builds the client without contacting the service.
func newDB(ctx context.Context, cfg Config) (*DB, error) {
	if cfg.Table == "" {
		return nil, errors.New("dynamolog: table is required")
	}
	if (cfg.AccessKeyID == "") != (cfg.SecretAccessKey == "") {
		return nil, errors.New("dynamolog: static credentials need both an access key id and a secret")
	}
	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("dynamolog: loading AWS config: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = defaultRegion
	}
	client := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		if cfg.HTTPClient != nil {
			// Set on the client, not through LoadDefaultConfig, which
			// insists on a client it can add AWS_CA_BUNDLE to.
			o.HTTPClient = cfg.HTTPClient
		}
	})
	return &DB{client: client, table: cfg.Table}, nil
}

// ensure checks the table once, creating it if missing.
func (db *DB) ensure(ctx context.Context) error {
	db.ensureMu.Lock()
	defer db.ensureMu.Unlock()
	if db.ensured {
		return nil
	}
	if err := db.ensureTable(ctx); err != nil {
		return err
	}
	db.ensured = true
	return nil
}

func (db *DB) ensureTable(ctx context.Context) error {
	out, err := db.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(db.table)})
	var nf *types.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		_, err = db.client.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName: aws.String(db.table),
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String(attrLog), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String(attrPos), AttributeType: types.ScalarAttributeTypeN},
			},
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrLog), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrPos), KeyType: types.KeyTypeRange},
			},
			BillingMode: types.BillingModePayPerRequest,
		})
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("dynamolog: create table %s: %w", db.table, err)
		}
		w := dynamodb.NewTableExistsWaiter(db.client, func(o *dynamodb.TableExistsWaiterOptions) {
			o.MinDelay = 50 * time.Millisecond
			o.MaxDelay = 2 * time.Second
		})
		if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(db.table)}, tableWait); err != nil {
			return fmt.Errorf("dynamolog: wait for table %s: %w", db.table, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("dynamolog: describe table %s: %w", db.table, err)
	}
	return checkSchema(db.table, out.Table)
}

// checkSchema refuses a table whose keys are not the ones this package
// writes: items would go nowhere sensible.
func checkSchema(table string, d *types.TableDescription) error {
	want := map[string]types.KeyType{attrLog: types.KeyTypeHash, attrPos: types.KeyTypeRange}
	if d == nil || len(d.KeySchema) != len(want) {
		return fmt.Errorf("dynamolog: table %s: want key schema (log HASH, pos RANGE)", table)
	}
	for _, k := range d.KeySchema {
		if want[aws.ToString(k.AttributeName)] != k.KeyType {
			return fmt.Errorf("dynamolog: table %s: key %s is %s; want (log HASH, pos RANGE)", table, aws.ToString(k.AttributeName), k.KeyType)
		}
	}
	return nil
}

// Table returns the table's name.
func (db *DB) Table() string { return db.table }

// Loglet opens a handle on the loglet logID, which exists as soon as it
// is written; an id that was never written is an empty loglet. The DB
// must come from Connect.
func (db *DB) Loglet(logID string, opts Options) (*slotlog.Loglet, error) {
	if logID == "" || len(logID) > MaxLogIDBytes {
		return nil, fmt.Errorf("dynamolog: log id must be 1 to %d bytes", MaxLogIDBytes)
	}
	maxEntry := opts.MaxEntryBytes
	if maxEntry <= 0 || maxEntry > DefaultMaxEntryBytes {
		maxEntry = DefaultMaxEntryBytes
	}
	return slotlog.New(slotlog.Config{
		Slots:         &store{db: db, pk: "log:" + logID},
		Name:          "dynamodb://" + db.table + "/" + logID,
		Window:        Window,
		InFlight:      opts.InFlight,
		MaxEntryBytes: maxEntry,
		PutAttempts:   opts.PutAttempts,
		RetryBackoff:  opts.RetryBackoff,
		TrimGrace:     opts.TrimGrace,
		Clock:         opts.Clock,
	})
}

// OpenURL connects to the table a dynamodb:// URL names (see Target) and
// opens a handle on the loglet its path names.
func OpenURL(ctx context.Context, rawURL string, opts Options) (*slotlog.Loglet, error) {
	t, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	db, err := Connect(ctx, t.Config)
	if err != nil {
		return nil, err
	}
	return db.Loglet(t.Path, opts)
}

// OpenMetaStoreURL returns the MetaStore of the VirtualLog a dynamodb://
// URL names. It connects (and creates the table) on first use.
func OpenMetaStoreURL(rawURL string) (*MetaStore, error) {
	t, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	// Loading the AWS configuration reads the environment and files, not
	// the network, so it needs no caller's context.
	db, err := newDB(context.Background(), t.Config)
	if err != nil {
		return nil, err
	}
	return db.MetaStore(t.Path)
}

// FirstSegment is the path, below a VirtualLog's, of its first segment.
const FirstSegment = "seg-00000000"

// FirstSegmentURL names the first segment of the VirtualLog a dynamodb://
// URL names: path/seg-00000000 in the same table. Later segments follow
// sharedlog.DefaultNextURL, which renumbers that last path element.
func FirstSegmentURL(rawURL string) (string, error) {
	t, err := ParseURL(rawURL)
	if err != nil {
		return "", err
	}
	return t.URL(t.Path + "/" + FirstSegment), nil
}
