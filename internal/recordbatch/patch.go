package recordbatch

import (
	"encoding/binary"
	"hash/crc32"
)

// SetBaseOffset writes off into the batch's baseOffset, the first 8 bytes.
// They are outside the CRC, so the fetch path can patch a copy of a stored
// batch with the offset apply assigned without touching anything else.
// batch must be at least 8 bytes (any batch Next returned is).
func SetBaseOffset(batch []byte, off int64) {
	binary.BigEndian.PutUint64(batch[offBaseOffset:], uint64(off))
}

// SetPartitionLeaderEpoch writes the partitionLeaderEpoch field (bytes
// 12-15, outside the CRC). Kafka stamps every stored batch with the leader
// epoch; clients use it to detect log truncation (KIP-320), and -1 means
// unknown, which disables that check.
func SetPartitionLeaderEpoch(batch []byte, epoch int32) {
	binary.BigEndian.PutUint32(batch[offLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime makes a validated batch carry LogAppendTime, as Kafka's
// broker does for topics with message.timestamp.type=LogAppendTime: it sets
// the timestamp-type attribute bit and maxTimestamp to ts (milliseconds) and,
// since both lie inside the CRC, recomputes the CRC. Consumers then report ts
// as every record's timestamp. firstTimestamp is left as the producer set it,
// as in Kafka. Like Kafka's DefaultRecordBatch.setMaxTimestamp, it leaves a
// batch that already says so untouched.
//
// batch must be a whole v2 batch (Validate it first); the proposer stamps ts
// once, before the batch goes into a data object, so every replica agrees.
func SetLogAppendTime(batch []byte, ts int64) {
	be := binary.BigEndian
	attrs := be.Uint16(batch[offAttributes:])
	if attrs&attrLogAppendTime != 0 && int64(be.Uint64(batch[offMaxTimestamp:])) == ts {
		return
	}
	be.PutUint16(batch[offAttributes:], attrs|attrLogAppendTime)
	be.PutUint64(batch[offMaxTimestamp:], uint64(ts))
	be.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], castagnoli))
}

// Control record layout of a transaction marker (Kafka's
// EndTransactionMarker): key = version int16 (0), type int16 (0 abort,
// 1 commit); value = version int16 (0), coordinatorEpoch int32.
const (
	controlKeySize   = 4
	controlValueSize = 6
	// controlRecordBodySize: attributes (1), timestampDelta (varint 0: 1),
	// offsetDelta (varint 0: 1), key length (varint 4: 1), key,
	// value length (varint 6: 1), value, header count (varint 0: 1).
	controlRecordBodySize = 1 + 1 + 1 + 1 + controlKeySize + 1 + controlValueSize + 1
	// controlRecordSize adds the record's own length varint (1 byte for 16).
	controlRecordSize = 1 + controlRecordBodySize

	// ControlBatchSize is the size of every marker batch ControlBatch makes.
	ControlBatchSize = HeaderSize + controlRecordSize

	// Marker types, the int16 in a control record's key.
	controlTypeAbort  = 0
	controlTypeCommit = 1
)

// ControlBatch synthesizes the transaction marker Kafka writes when a
// transaction ends: a transactional control batch holding one control record
// whose key says commit or abort and whose value carries the transaction
// coordinator's epoch. Strand keeps markers as index entries, not object
// bytes, so the fetch path builds them with this.
//
// baseOffset is offset; firstTimestamp and maxTimestamp are timestamp; the
// partition leader epoch is -1 (patch it with SetPartitionLeaderEpoch when
// data batches carry one); baseSequence is -1, as Kafka writes it.
func ControlBatch(producerID int64, epoch int16, commit bool, offset int64, timestamp int64, coordinatorEpoch int32) []byte {
	return AppendControlBatch(make([]byte, 0, ControlBatchSize), producerID, epoch, commit, offset, timestamp, coordinatorEpoch)
}

// AppendControlBatch is ControlBatch appending to dst, so a fetch response can
// be assembled in one buffer.
func AppendControlBatch(dst []byte, producerID int64, epoch int16, commit bool, offset int64, timestamp int64, coordinatorEpoch int32) []byte {
	be := binary.BigEndian
	start := len(dst)
	dst = be.AppendUint64(dst, uint64(offset))
	dst = be.AppendUint32(dst, uint32(ControlBatchSize-LogOverhead))
	dst = be.AppendUint32(dst, 0xffffffff) // partitionLeaderEpoch -1
	dst = append(dst, 2)                   // magic
	dst = be.AppendUint32(dst, 0)          // CRC, filled in below
	dst = be.AppendUint16(dst, attrTransactional|attrControl)
	dst = be.AppendUint32(dst, 0) // lastOffsetDelta
	dst = be.AppendUint64(dst, uint64(timestamp))
	dst = be.AppendUint64(dst, uint64(timestamp))
	dst = be.AppendUint64(dst, uint64(producerID))
	dst = be.AppendUint16(dst, uint16(epoch))
	dst = be.AppendUint32(dst, 0xffffffff) // baseSequence -1
	dst = be.AppendUint32(dst, 1)          // numRecords

	markerType := uint16(controlTypeAbort)
	if commit {
		markerType = controlTypeCommit
	}
	dst = binary.AppendVarint(dst, controlRecordBodySize)
	dst = append(dst, 0)              // record attributes
	dst = binary.AppendVarint(dst, 0) // timestampDelta
	dst = binary.AppendVarint(dst, 0) // offsetDelta
	dst = binary.AppendVarint(dst, controlKeySize)
	dst = be.AppendUint16(dst, 0) // key version
	dst = be.AppendUint16(dst, markerType)
	dst = binary.AppendVarint(dst, controlValueSize)
	dst = be.AppendUint16(dst, 0) // value version
	dst = be.AppendUint32(dst, uint32(coordinatorEpoch))
	dst = binary.AppendVarint(dst, 0) // header count

	batch := dst[start:]
	be.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], castagnoli))
	return dst
}
