package agent

import (
	"github.com/strandkafka/strand/internal/connect"
	"github.com/strandkafka/strand/internal/connect/jdbcsink"
	"github.com/strandkafka/strand/internal/connect/pgsource"
)

// connectClasses are the connector classes every agent runs, by
// connector.class: the PostgreSQL source (connect/pgsource) and the JDBC
// sink (connect/jdbcsink). A class's own metrics are registered here, on
// a.metrics.reg.
func connectClasses(a *Agent) []connect.Class {
	pm, jm := pgsource.NewMetrics(), jdbcsink.NewMetrics()
	a.metrics.reg.MustRegister(pm.Collectors()...)
	a.metrics.reg.MustRegister(jm.Collectors()...)
	return []connect.Class{pgsource.Class(pm), jdbcsink.Class(jm)}
}
