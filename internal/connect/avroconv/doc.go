// Package avroconv owns the connectors' Avro: Confluent's AvroConverter
// (io.confluent.connect.avro.AvroConverter) as Kafka Connect's workers
// run it, between the JsonConverter's form the connectors already
// speak ({"schema": <Connect schema>, "payload": ...}) and Confluent's
// wire format with its schema in a Confluent-compatible registry
// (franz-go's pkg/sr client; Strand's agents serve one).
//
// Writing (FromConnect): the Connect schema is mapped to Avro as
// Confluent's AvroData does with connect.meta.data on: structs are
// records named by the Connect name split at its last dot, a name's
// second use a reference, optional fields unions with null (null first
// and default null, or the type first when the field has a default),
// connect.name/version/parameters/doc/default properties, int8 and
// int16 as int with connect.type, Decimal as bytes with logicalType
// decimal. The Avro schema is registered under the TopicNameStrategy
// subject (<topic>-key, <topic>-value) or, with
// auto.register.schemas=false, looked up; ids are cached by subject and
// schema text. Reading (ToConnect): the writer's schema is fetched by
// the record's id (cached), the record decoded with hamba/avro, the
// Avro schema mapped back to Connect's as AvroData.toConnectSchema does,
// and the payload rendered as the JsonConverter would have written it.
//
// A record in Confluent's wire format:
//
//	+-------+------------------+---------------------------+
//	| 0x00  | schema id        | Avro binary encoding      |
//	| magic | uint32 big-endian| of the payload            |
//	+-------+------------------+---------------------------+
//	  1 byte      4 bytes        the rest
//
// A nil key or value (a tombstone, a keyless table's key) stays nil.
//
// Not served, and refused by Parse with a message saying so: Confluent's
// Protobuf and JSON Schema converters, Apicurio's wire format, subject
// name strategies other than TopicNameStrategy, use.latest.version,
// connect.meta.data=false, credentials in the URL (the URL is no
// secret) and SASL_INHERIT; on reading, unions
// of more than one non-null type and schemas with references.
package avroconv
