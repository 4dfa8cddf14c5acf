module github.com/strandkafka/strand

go 1.26.8

require github.com/spf13/cobra v1.0.0

require (
	github.com/inconshreveable/mousetrap v1.0.0 // indirect
	github.com/spf13/pflag v1.0.5 // indirect
)
