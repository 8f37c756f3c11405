package kafka

import (
	"github.com/sluicemq/sluice/libs/server/service"
)

// Register adds the listener's flags (-kafka-*) to fs, with c's values as
// defaults. Call Finish after parsing.
func (c *Config) Register(fs *service.FlagSet) {
	fs.String(&c.Addr, "kafka-addr", c.Addr, `listen address of the Kafka protocol listener ("" turns it off)`)
	fs.String(&c.AdvertisedAddr, "kafka-advertised-addr", c.AdvertisedAddr, "address Kafka clients are told to dial (Kafka's advertised.listeners; default: -kafka-addr)")
	fs.String(&c.sasl, "kafka-sasl-mechanisms", c.sasl, "comma-separated SASL mechanisms the Kafka listener requires (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; empty: no SASL)")
	fs.Int(&c.MaxRequestBytes, "kafka-max-request-bytes", c.MaxRequestBytes, "largest Kafka request accepted (Kafka's socket.request.max.bytes); a larger one closes its connection")
	fs.Int64(&c.MaxQueuedBytes, "kafka-max-queued-bytes", c.MaxQueuedBytes, "bytes of Kafka requests read or being served at once (Kafka's queued.max.request.bytes); past it reading waits")
	fs.Duration(&c.IdleTimeout, "kafka-idle-timeout", c.IdleTimeout, "a Kafka connection idle this long is closed (Kafka's connections.max.idle.ms)")
	fs.Int(&c.MaxConnsPerIP, "kafka-max-connections-per-ip", c.MaxConnsPerIP, "open Kafka connections allowed from one client address; 0: no limit")
	fs.Int(&c.FetchSessions.Slots, "kafka-fetch-session-slots", c.FetchSessions.Slots, "fetch sessions (KIP-227) the listener keeps (Kafka's max.incremental.fetch.session.cache.slots); 0: none, every fetch names all its partitions")
	fs.Duration(&c.FetchSessions.EvictAfter, "kafka-fetch-session-evict-after", c.FetchSessions.EvictAfter, "how long a fetch session must be unused before a new one may take its slot in a full cache (Kafka's min.incremental.fetch.session.eviction.ms)")
}

// Finish completes the configuration after the flags were parsed.
func (c *Config) Finish() { c.SASLMechanisms = service.SplitList(c.sasl) }
