package agent

import "strings"

// EffectiveListeners renders the listeners the agent would open, in
// Kafka's form (NAME://host:port,...; --kafka-listen is the PLAINTEXT
// listener), and the address each advertises (its bound one unless
// advertised-listeners or advertise names another), for strand config
// print. Call it on a Config after SetDefaults.
func (c *Config) EffectiveListeners() (listeners, advertised string, err error) {
	specs, err := c.listenerSpecs()
	if err != nil {
		return "", "", err
	}
	adv, err := c.advertisedAddrs(specs)
	if err != nil {
		return "", "", err
	}
	var ls, as []string
	for _, s := range specs {
		ls = append(ls, s.name+"://"+s.addr)
		a, ok := adv[s.name]
		if !ok {
			a = s.addr
		}
		as = append(as, s.name+"://"+a)
	}
	return strings.Join(ls, ","), strings.Join(as, ","), nil
}
