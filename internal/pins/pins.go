// Package pins holds blank imports of the dependencies Strand is being built
// on, so `go mod tidy` keeps their pinned versions while the packages that
// use them are written. Remove an import once real code imports it.
package pins

import (
	_ "github.com/aws/aws-sdk-go-v2/config"
	_ "github.com/aws/aws-sdk-go-v2/service/s3"
	_ "github.com/cockroachdb/pebble/v2"
	_ "github.com/johannesboyne/gofakes3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "github.com/twmb/franz-go/pkg/kmsg"
)
