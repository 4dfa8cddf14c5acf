package logurl

import (
	"github.com/strandkafka/strand/internal/sharedlog/dynamolog"
	"github.com/strandkafka/strand/internal/sharedlog/s3log"
)

// The AWS backends, beside the remotes in remote.go:
//
//	dynamodb://table/path?endpoint=URL&region=R
//	    loglet: the items of log id path (dynamolog)
//	    VirtualLog: the chain item named path, segments path/seg-NNNNNNNN
//	s3://bucket/prefix?endpoint=URL&region=R&path-style=true
//	    loglet: the objects under prefix/ (s3log)
//	    VirtualLog: the chain in prefix/chain.json, segments prefix/seg-NNNNNNNN
//
// Credentials come from the AWS default chain. Segment names follow
// sharedlog.DefaultNextURL, which keeps the query.
func init() {
	remotes["dynamodb"] = remote{
		open:         openURL(dynamolog.OpenURL),
		metaStore:    metaStoreURL(dynamolog.OpenMetaStoreURL),
		firstSegment: dynamolog.FirstSegmentURL,
		billed:       true,
	}
	remotes["s3"] = remote{
		open:         openURL(s3log.OpenURL),
		metaStore:    metaStoreURL(s3log.OpenMetaStoreURL),
		firstSegment: s3log.FirstSegmentURL,
		billed:       true,
	}
}
