// The Connectors page: every connector the caller may see, with its
// class, state, the agent that runs its task and a failed task's
// trace (Config.Connectors). Managing them is the Connect REST API's
// (and `strand connect`'s); the page only shows.

package console

import "net/http"

// Connector is one connector as the page lists it.
type Connector struct {
	Name, Class, Type string
	// State is the connector's (RUNNING, PAUSED), TaskState its task's
	// (RUNNING, FAILED, UNASSIGNED, PAUSED), Worker the agent running
	// it (host:port of its Connect API), Trace a failed task's error.
	State, TaskState, Worker, Trace string
}

type connectorsData struct {
	Connectors []Connector
	Err        string
}

func (c *Console) handleConnectors(w http.ResponseWriter, r *http.Request) {
	var d connectorsData
	if c.cfg.Connectors != nil {
		cs, err := c.cfg.Connectors(r)
		if err != nil {
			d.Err = err.Error()
		}
		d.Connectors = cs
	}
	c.render(w, r, http.StatusOK, "connectors", page{Title: "Connectors", Nav: "connectors", Data: d})
}
