package avroconv

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Converter classes, as Kafka Connect configurations name them.
const (
	// AvroClass is Confluent's AvroConverter, the one served here.
	AvroClass = "io.confluent.connect.avro.AvroConverter"
	// JSONClass is Kafka's JsonConverter, the connectors' default.
	JSONClass = "org.apache.kafka.connect.json.JsonConverter"
)

// refused are converters users configure that Strand does not serve,
// with what to use instead.
var refused = map[string]string{
	"io.confluent.connect.protobuf.ProtobufConverter":        "Protobuf is not served; use " + AvroClass + " or " + JSONClass,
	"io.confluent.connect.json.JsonSchemaConverter":          "JSON Schema is not served; use " + AvroClass + " or " + JSONClass,
	"io.apicurio.registry.utils.converter.AvroConverter":     "Apicurio's wire format is not served; use " + AvroClass,
	"org.apache.kafka.connect.storage.StringConverter":       "not served; use " + AvroClass + " or " + JSONClass,
	"org.apache.kafka.connect.converters.ByteArrayConverter": "not served; use " + AvroClass + " or " + JSONClass,
}

// topicNameStrategy is the only subject name strategy served: the
// subject of a topic's keys is <topic>-key, of its values <topic>-value.
const topicNameStrategy = "io.confluent.kafka.serializers.subject.TopicNameStrategy"

// Config is one side's (key or value) AvroConverter configuration.
type Config struct {
	// Key: the converter of record keys (subject <topic>-key).
	Key  bool
	URLs []string
	// User and Password: basic auth (USER_INFO).
	User, Password string
	// AutoRegister: register a schema not yet in the subject (true, as
	// Confluent's default); false looks it up and fails if missing.
	AutoRegister bool
}

// Secret reports whether a configuration key holds a secret: the
// registry's basic auth user info, bare or under any prefix
// (key.converter., value.converter., Confluent's schema.registry.).
func Secret(key string) bool { return strings.HasSuffix(key, "basic.auth.user.info") }

// Parse reads side's ("key" or "value") converter from a connector
// configuration: nil (and no error) when the side's converter is the
// JsonConverter (or unset), a Config for the AvroConverter, an error
// for any other class or a bad setting. Keys are looked up as
// <side>.converter.<name>, then as the bare <name>, as Connect passes a
// worker's or connector's un-prefixed registry settings to both sides.
func Parse(m map[string]string, side string) (*Config, error) {
	get := func(name string) string {
		if v := strings.TrimSpace(m[side+".converter."+name]); v != "" {
			return v
		}
		return strings.TrimSpace(m[name])
	}
	class := strings.TrimSpace(m[side+".converter"])
	switch class {
	case "", JSONClass:
		return nil, nil
	case AvroClass:
	default:
		if why, ok := refused[class]; ok {
			return nil, fmt.Errorf("Invalid value %q for configuration %s.converter: %s", class, side, why)
		}
		return nil, fmt.Errorf("Invalid value %q for configuration %s.converter: Strand serves %s and %s", class, side, JSONClass, AvroClass)
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	c := &Config{Key: side == "key", AutoRegister: true}
	raw := get("schema.registry.url")
	if raw == "" {
		bad("Missing required configuration %q (or %q) for %s", side+".converter.schema.registry.url", "schema.registry.url", AvroClass)
	}
	for u := range strings.SplitSeq(raw, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			bad("Invalid value %q for configuration %s.converter.schema.registry.url: an http or https URL", u, side)
			continue
		}
		if pu.User != nil {
			// The URL is no secret (the API shows it, the shared log
			// holds it), so it may not carry one.
			bad("Invalid value for configuration %s.converter.schema.registry.url: credentials in the URL would be stored in the clear; use basic.auth.credentials.source=USER_INFO with basic.auth.user.info (kept secret)", side)
			continue
		}
		c.URLs = append(c.URLs, pu.String())
	}
	switch src := get("basic.auth.credentials.source"); src {
	case "":
		if info := get("basic.auth.user.info"); info != "" {
			bad("Configuration %s.converter.basic.auth.user.info needs %s.converter.basic.auth.credentials.source=USER_INFO", side, side)
		}
	case "USER_INFO":
		info := get("basic.auth.user.info")
		user, pass, ok := strings.Cut(info, ":")
		if !ok || user == "" {
			bad("Configuration %s.converter.basic.auth.user.info: <user>:<password> with credentials source USER_INFO", side)
		}
		c.User, c.Password = user, pass
	default:
		bad("Invalid value %q for configuration %s.converter.basic.auth.credentials.source: USER_INFO only (URL would keep the password in the clear; SASL_INHERIT is not served)", src, side)
	}
	if v := get("auto.register.schemas"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad("Invalid value %q for configuration %s.converter.auto.register.schemas: true or false", v, side)
		}
		c.AutoRegister = b
	}
	for _, k := range []string{"key.subject.name.strategy", "value.subject.name.strategy"} {
		if v := get(k); v != "" && v != topicNameStrategy {
			bad("Invalid value %q for configuration %s.converter.%s: only %s is served", v, side, k, topicNameStrategy)
		}
	}
	if v := get("use.latest.version"); v == "true" {
		bad("Invalid value %q for configuration %s.converter.use.latest.version: Strand writes with the record's own schema", v, side)
	}
	if v := get("connect.meta.data"); v == "false" {
		bad("Invalid value %q for configuration %s.converter.connect.meta.data: Strand always writes Connect's metadata (connect.name, ...)", v, side)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}
