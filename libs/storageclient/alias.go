package storageclient

import "github.com/vmihailenco/msgpack/v5"

type (
	msgpackEncoder = msgpack.Encoder
	msgpackDecoder = msgpack.Decoder
)
