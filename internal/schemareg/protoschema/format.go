// Package protoschema owns the registry's PROTOBUF format: parsing a
// schema (the text of one .proto file, its imports given as references
// or found among the well-known google/protobuf files), printing its
// canonical text, and Confluent's Protobuf compatibility rules.
//
// Parsing and linking are protocompile's; this package never reads
// .proto text itself. The canonical text and the compatibility check
// both work on the linked descriptors, so they see resolved types
// whatever the source's spelling.
package protoschema

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/strandkafka/strand/internal/schemareg"
)

// Format is the PROTOBUF schemareg.Format. Its zero value is ready and
// safe for concurrent use.
type Format struct{}

var _ schemareg.Format = Format{}

// Type is schemareg.TypeProtobuf.
func (Format) Type() schemareg.Type { return schemareg.TypeProtobuf }

// rootName is the path the schema being parsed is compiled under; it
// shows in compiler messages. A reference of that name moves the
// schema aside rather than shadowing the reference.
const rootName = "schema.proto"

// Parse compiles text as one .proto file. refs maps import paths to
// their .proto text; an import of google/protobuf/*.proto found in
// neither refs nor text resolves to protocompile's copy of the
// well-known file, as Confluent resolves it to the bundled one.
func (Format) Parse(text string, refs schemareg.Resolved) (schemareg.Schema, error) {
	root := rootName
	for {
		if _, taken := refs[root]; !taken {
			break
		}
		root = "_" + root
	}
	accessor := func(path string) (io.ReadCloser, error) {
		if path == root {
			return io.NopCloser(strings.NewReader(text)), nil
		}
		if src, ok := refs[path]; ok {
			return io.NopCloser(strings.NewReader(src)), nil
		}
		return nil, fs.ErrNotExist
	}
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{Accessor: accessor}),
		// One file and its imports: more goroutines buy nothing.
		MaxParallelism: 1,
	}
	files, err := c.Compile(context.Background(), root)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", schemareg.ErrInvalidSchema, err)
	}
	res, ok := files[0].(linker.Result)
	if !ok {
		// Only a resolver handing back descriptors yields a file
		// without its AST, and ours hands back source.
		return nil, fmt.Errorf("%w: %s compiled without source", schemareg.ErrInvalidSchema, root)
	}
	// Compatible needs only the descriptors.
	res.RemoveAST()
	return &Schema{
		file:       res,
		root:       root,
		canonical:  printFile(res, false),
		normalized: printFile(res, true),
	}, nil
}

// Schema is a parsed PROTOBUF schema. It is immutable and safe for
// concurrent use.
type Schema struct {
	file       protoreflect.FileDescriptor
	root       string
	canonical  string
	normalized string
}

var _ schemareg.Schema = (*Schema)(nil)

// Type is schemareg.TypeProtobuf.
func (*Schema) Type() schemareg.Type { return schemareg.TypeProtobuf }

// Canonical is the schema re-printed from its descriptors, as
// Confluent's ProtobufSchema.canonicalString re-prints its parsed
// file; see printFile for what normalize changes and what is dropped.
func (s *Schema) Canonical(normalize bool) string {
	if normalize {
		return s.normalized
	}
	return s.canonical
}

// Descriptor is the schema's linked file descriptor; its imports are
// the references and well-known files it resolved.
func (s *Schema) Descriptor() protoreflect.FileDescriptor { return s.file }
