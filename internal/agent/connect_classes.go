package agent

import "github.com/strandkafka/strand/internal/connect"

// connectClasses are the connector classes every agent runs, by
// connector.class: the PostgreSQL source (connect/pgsource) and the JDBC
// sink (connect/jdbcsink) join this list as they land. A class's own
// metrics are registered here, on a.metrics.reg.
func connectClasses(a *Agent) []connect.Class {
	return nil
}
