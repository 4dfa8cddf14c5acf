package memlog_test

import (
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/loglettest"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

func TestConformance(t *testing.T) {
	loglettest.Run(t, func(t *testing.T) sharedlog.Loglet { return memlog.New() })
}
