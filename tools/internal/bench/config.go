package bench

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/jsonhttp"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/tools/internal/ctl"
)

// Modes.
const (
	ModeProduce = "produce"
	ModeConsume = "consume"
	ModeE2E     = "e2e"
	// ModeShare reads like consume, as members of a share group that
	// accept every record.
	ModeShare = "share"
)

// producesIn reports whether a mode sends records.
func producesIn(mode string) bool { return mode == ModeProduce || mode == ModeE2E }

// drains reports whether a mode reads a topic's backlog (consume, share)
// rather than what it produces.
func drains(mode string) bool { return mode == ModeConsume || mode == ModeShare }

// Bodies of produce requests.
const (
	BodySDK  = "sdk"
	BodyJSON = "json"
)

// Protocols of --protocol.
const (
	ProtocolSluice = "sluice" // the SDK (and HTTP) through the frontends' HTTP API
	ProtocolKafka  = "kafka"  // franz-go through the Kafka listeners
)

// DefaultBootstrap is the Kafka listener of make run.
const DefaultBootstrap = "127.0.0.1:9092"

// Values of --progress.
const (
	ProgressAuto = "auto"
	ProgressOn   = "on"
	ProgressOff  = "off"
)

// stampSize is the send-time stamp at the start of each e2e value.
const stampSize = 8

// defaultWarmupWithDuration is --warmup's default when --duration is given.
const defaultWarmupWithDuration = 2 * time.Second

// errUsage marks a usage error (exit status 2).
var errUsage = errors.New("usage")

// Config is one run of sluice-bench, filled from the command line by Parse.
type Config struct {
	Mode string // produce, consume or e2e

	// Protocol is sluice (the SDK, HTTP) or kafka (franz-go through the
	// Kafka listeners at Bootstrap).
	Protocol  string
	Bootstrap []string
	Frontends []string // base URLs of the frontends (produce, topic creation)
	Metadata  []string // metadata or frontend URLs (topic and partition look-ups); default Frontends
	Offsets   []string // offsets service replicas (consumer groups)

	Topic             string
	Partitions        int               // for a topic created by the run
	ReplicationFactor int               // for a topic created by the run
	TopicConfig       map[string]string // --config, for a topic created by the run
	// Explicit names the topic flags given on the command line: an existing
	// topic must agree with them.
	Explicit map[string]bool

	RecordSize int           // value bytes of each produced record
	Records    int64         // records to count; 0 with Duration
	Duration   time.Duration // measured period; 0 with Records
	Rate       float64       // records/s over all producers; 0: unthrottled
	Warmup     time.Duration // before counting starts (produce, e2e)
	Grace      time.Duration // e2e: how long consumers may catch up after producing ended

	Producers int    // SDK producers or JSON posters
	Consumers int    // group members
	Group     string // consumer group id
	// GroupConfig sets share-group configuration values (share).
	GroupConfig map[string]string

	Acks            int8
	Idempotent      bool
	Compression     record.Codec
	Linger          time.Duration // 0: send at once
	BatchSize       int
	DeliveryTimeout time.Duration

	// TxnRecords makes each SDK producer transactional, committing every
	// TxnRecords records (0: not transactional).
	TxnRecords int

	Keys      KeySpec
	Body      string // sdk or json
	JSONBatch int    // records per JSON request

	JSON     bool   // print one JSON object instead of the human summary
	Progress string // auto, on or off

	CPUProfile string // write a pprof CPU profile of the run here
}

// usage is printed with usage errors and for -h.
const usage = `sluice-bench: load generator and benchmark of a Sluice cluster

usage: sluice-bench produce|consume|e2e|share [flags]

  produce   send records (SDK producers, or JSON bodies over HTTP) and report
            throughput and send-to-acknowledgement latency
  consume   read the topic from the beginning as a consumer group and report
            throughput (the topic must exist; with --records N hold >= N records)
  e2e       produce and consume at once; latency is from send to receipt
  share     read the topic from the beginning as a share group whose members accept
            every record, and report acknowledged records/s (as consume, the topic must
            exist; compare with consume on the same records)

  disk and sendfile (given first) measure the physical limits instead (sluice-bench disk -h)

protocol:  --protocol sluice|kafka (sluice: the SDK or HTTP; kafka: franz-go through the
           Kafka listeners, --bootstrap host:port,... ($SLUICE_KAFKA, default ` + DefaultBootstrap + `))
cluster:   --frontends URLs ($SLUICE_FRONTEND, default ` + ctl.DefaultFrontend + `)
           --metadata URLs ($SLUICE_METADATA, default: the frontends)
           --offsets URLs ($SLUICE_OFFSETS, default ` + ctl.DefaultOffsets + `)
topic:     --topic T (default sluice-bench; created when missing by produce and e2e with)
           --partitions N (4) --replication-factor R (the cluster's default) --config k=v (repeatable)
amount:    --records N (default 1000000) | --duration D;  --warmup D (default 2s with
           --duration, else 0; not for consume);  --rate R records/s in all (0: unthrottled)
records:   --record-size|--size BYTES (100; e2e needs >= 8)  --keys none|random|fixed:N
producing: --producers N (1)  --body sdk|json  --acks all|leader|none  --idempotence (true;
           off by itself with leader/none)  --compression none|gzip|snappy|lz4|zstd
           --linger D (5ms; 0 sends at once)  --batch-size BYTES (1048576)
           --delivery-timeout D (2m)  --json-batch N (1000 records a JSON request)
           --txn-records N (0: each producer is transactional and commits every N
           records; the SDK's coordinator is the --offsets service)
consuming: --consumers N (1)  --group G (default sluice-bench-<random>)
           --group-config k=v (share: a share-group setting, repeatable, e.g.
           share.max.fetch.records=1000; the group starts at the earliest offsets
           unless share.auto.offset.reset is given)
           --grace D (e2e: 10s for consumers to catch up after producing ended)
output:    --json (one JSON object on stdout)  --progress auto|on|off (stderr, auto: on a terminal)
           --cpuprofile FILE (a pprof CPU profile of the client side of the run)
           --version (print the version, the commit and the Go version, and exit)

Throughput counts record values only (MB = 10^6 bytes). Exit status: 0 success,
1 some record failed, 2 usage error, 130 interrupted (the summary is printed).
`

// modeFlags lists the flags only some modes use; every mode takes the flags
// not listed (the cluster's addresses among them, so that scripts may pass
// them all every time).
var modeFlags = map[string][]string{
	"partitions": {ModeProduce, ModeE2E}, "replication-factor": {ModeProduce, ModeE2E}, "config": {ModeProduce, ModeE2E},
	"record-size": {ModeProduce, ModeE2E}, "size": {ModeProduce, ModeE2E}, "rate": {ModeProduce, ModeE2E},
	"warmup": {ModeProduce, ModeE2E}, "producers": {ModeProduce, ModeE2E}, "acks": {ModeProduce, ModeE2E},
	"idempotence": {ModeProduce, ModeE2E}, "compression": {ModeProduce, ModeE2E}, "linger": {ModeProduce, ModeE2E},
	"batch-size": {ModeProduce, ModeE2E}, "delivery-timeout": {ModeProduce, ModeE2E}, "keys": {ModeProduce, ModeE2E},
	"body": {ModeProduce, ModeE2E}, "json-batch": {ModeProduce, ModeE2E}, "txn-records": {ModeProduce, ModeE2E},
	"consumers": {ModeConsume, ModeE2E, ModeShare}, "group": {ModeConsume, ModeE2E, ModeShare}, "group-config": {ModeShare},
	"grace": {ModeE2E},
}

// sluiceOnly are the flags --protocol kafka does not use.
var sluiceOnly = []string{"body", "json-batch", "group-config"}

// sdkOnly and jsonOnly are the producing flags of one --body.
var (
	sdkOnly  = []string{"idempotence", "compression", "linger", "batch-size", "txn-records"}
	jsonOnly = []string{"json-batch"}
)

// kvFlags collects repeated --config k=v.
type kvFlags map[string]string

func (k kvFlags) String() string { return fmt.Sprint(map[string]string(k)) }
func (k kvFlags) Set(s string) error {
	key, val, ok := strings.Cut(s, "=")
	if !ok || key == "" {
		return fmt.Errorf("%q is not key=value", s)
	}
	k[key] = val
	return nil
}

// rawFlags holds the flags that become Config fields only after checks.
type rawFlags struct {
	frontends, metadata, offsets string
	bootstrap                    string
	acks, compression, keys      string
	records                      int64
	recordSize                   int
	topicConfig, groupConfig     kvFlags
	idempotence                  bool
	warmup                       time.Duration
}

// Parse reads the command line (without the program name); getenv supplies
// the SLUICE_* fallbacks. Every error wraps errUsage and names the flag.
func Parse(args []string, getenv func(string) string) (Config, error) {
	var c Config
	raw := rawFlags{topicConfig: kvFlags{}, groupConfig: kvFlags{}}
	fs := newFlagSet(&c, &raw, getenv)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return c, err
	}
	if len(pos) != 1 {
		return c, fmt.Errorf("%w: want one mode (produce, consume, e2e or share), got %d argument(s)", errUsage, len(pos))
	}
	c.Mode = pos[0]
	switch c.Mode {
	case ModeProduce, ModeConsume, ModeE2E, ModeShare:
	default:
		return c, fmt.Errorf("%w: unknown mode %q (produce, consume, e2e or share)", errUsage, c.Mode)
	}
	c.Explicit = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.Explicit[f.Name] = true })
	for name := range c.Explicit {
		if modes, ok := modeFlags[name]; ok && !slices.Contains(modes, c.Mode) {
			return c, fmt.Errorf("%w: --%s is not used by %s (only by %s)", errUsage, name, c.Mode, strings.Join(modes, ", "))
		}
	}
	if err := c.apply(raw); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// newFlagSet defines the flags, filling c and raw.
func newFlagSet(c *Config, raw *rawFlags, getenv func(string) string) *flag.FlagSet {
	envOr := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	pd := client.DefaultProducerConfig()
	fs := flag.NewFlagSet("sluice-bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.Protocol, "protocol", ProtocolSluice, "sluice (the SDK, HTTP) or kafka (franz-go through the Kafka listeners)")
	fs.StringVar(&raw.bootstrap, "bootstrap", envOr("SLUICE_KAFKA", DefaultBootstrap), "Kafka bootstrap servers, comma-separated (--protocol kafka)")
	fs.StringVar(&raw.frontends, "frontends", envOr("SLUICE_FRONTEND", ctl.DefaultFrontend), "frontend base URLs, comma-separated")
	fs.StringVar(&raw.metadata, "metadata", envOr("SLUICE_METADATA", ""), "metadata or frontend URLs (default: the frontends)")
	fs.StringVar(&raw.offsets, "offsets", envOr("SLUICE_OFFSETS", ctl.DefaultOffsets), "offsets service URLs")
	fs.StringVar(&c.Topic, "topic", "sluice-bench", "topic")
	fs.IntVar(&c.Partitions, "partitions", 4, "partitions of a created topic")
	fs.IntVar(&c.ReplicationFactor, "replication-factor", 0, "replication factor of a created topic (0: the cluster's default)")
	fs.Var(raw.topicConfig, "config", "topic config key=value of a created topic (repeatable)")
	fs.Var(raw.groupConfig, "group-config", "share-group config key=value (repeatable)")
	fs.IntVar(&raw.recordSize, "record-size", 100, "value bytes of each record")
	fs.IntVar(&raw.recordSize, "size", 100, "the same as --record-size")
	fs.Int64Var(&raw.records, "records", 1_000_000, "records to count")
	fs.DurationVar(&c.Duration, "duration", 0, "measured period (instead of --records)")
	fs.Float64Var(&c.Rate, "rate", 0, "records/s over all producers (0: unthrottled)")
	fs.DurationVar(&raw.warmup, "warmup", 0, "warm-up before counting")
	fs.DurationVar(&c.Grace, "grace", 10*time.Second, "e2e: time for consumers to catch up after producing ended")
	fs.IntVar(&c.Producers, "producers", 1, "producers")
	fs.IntVar(&c.Consumers, "consumers", 1, "consumer group members")
	fs.StringVar(&c.Group, "group", "", "consumer group id (default sluice-bench-<random>)")
	fs.StringVar(&raw.acks, "acks", "all", "all, leader or none")
	fs.BoolVar(&raw.idempotence, "idempotence", true, "idempotent SDK producer (needs --acks all)")
	fs.StringVar(&raw.compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
	fs.DurationVar(&c.Linger, "linger", pd.Linger, "how long a batch waits for more records (0: send at once)")
	fs.IntVar(&c.BatchSize, "batch-size", pd.BatchSize, "largest batch in bytes")
	fs.DurationVar(&c.DeliveryTimeout, "delivery-timeout", pd.DeliveryTimeout, "time from send to outcome, retries included")
	fs.StringVar(&raw.keys, "keys", "none", "none, random or fixed:N")
	fs.StringVar(&c.Body, "body", BodySDK, "sdk or json")
	fs.IntVar(&c.JSONBatch, "json-batch", 1000, "records a JSON request")
	fs.IntVar(&c.TxnRecords, "txn-records", 0, "records per transaction of each SDK producer (0: not transactional)")
	fs.BoolVar(&c.JSON, "json", false, "print one JSON object")
	fs.StringVar(&c.Progress, "progress", ProgressAuto, "auto, on or off")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	return fs
}

// apply turns the raw flags into Config fields, with the defaults that
// depend on other flags.
func (c *Config) apply(raw rawFlags) error {
	set := c.Explicit
	if set["records"] && set["duration"] {
		return fmt.Errorf("%w: --records and --duration exclude each other", errUsage)
	}
	if set["record-size"] && set["size"] {
		return fmt.Errorf("%w: --record-size and --size are the same flag; give one", errUsage)
	}
	c.RecordSize = raw.recordSize
	if set["duration"] {
		if c.Duration <= 0 {
			return fmt.Errorf("%w: --duration: must be positive", errUsage)
		}
	} else {
		c.Records = raw.records
	}
	c.Warmup = raw.warmup
	if !set["warmup"] && c.Duration > 0 && producesIn(c.Mode) {
		c.Warmup = defaultWarmupWithDuration
	}
	for _, b := range strings.Split(raw.bootstrap, ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.Bootstrap = append(c.Bootstrap, b)
		}
	}
	c.Frontends = jsonhttp.BaseURLs(strings.Split(raw.frontends, ","))
	c.Metadata = jsonhttp.BaseURLs(strings.Split(raw.metadata, ","))
	if len(c.Metadata) == 0 {
		c.Metadata = c.Frontends
	}
	c.Offsets = jsonhttp.BaseURLs(strings.Split(raw.offsets, ","))
	c.TopicConfig = raw.topicConfig
	c.GroupConfig = raw.groupConfig
	if c.Group == "" {
		c.Group = "sluice-bench-" + randomHex(8)
	}
	switch raw.acks {
	case "all", "-1":
		c.Acks = protocol.AcksAll
	case "leader", "1":
		c.Acks = protocol.AcksLeader
	case "none", "0":
		c.Acks = protocol.AcksNone
	default:
		return fmt.Errorf("%w: --acks %q is not all, leader or none", errUsage, raw.acks)
	}
	c.Idempotent = raw.idempotence && c.Acks == protocol.AcksAll
	if raw.idempotence && set["idempotence"] && c.Acks != protocol.AcksAll {
		return fmt.Errorf("%w: --idempotence needs --acks all (leader and none turn it off by themselves)", errUsage)
	}
	var err error
	if c.Compression, err = record.ParseCodec(raw.compression); err != nil {
		return fmt.Errorf("%w: --compression: %w", errUsage, err)
	}
	if c.Keys, err = ParseKeySpec(raw.keys); err != nil {
		return fmt.Errorf("%w: --keys: %w", errUsage, err)
	}
	return nil
}

// Validate checks ranges and the relations between fields; errors wrap
// errUsage and name the flag.
func (c Config) Validate() error {
	if err := c.validateFlags(); err != nil {
		return err
	}
	if err := c.validateNames(); err != nil {
		return err
	}
	if !producesIn(c.Mode) {
		return nil
	}
	return c.validateProducer()
}

// bad is a usage error naming what is wrong.
func bad(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
}

// validateFlags checks each flag's range and the flags' combinations.
func (c Config) validateFlags() error {
	consuming := c.Mode != ModeProduce
	switch {
	case len(c.Frontends) == 0:
		return bad("--frontends: no address")
	case consuming && len(c.Offsets) == 0:
		return bad("--offsets: no address")
	case c.Duration < 0:
		return bad("--duration: must be positive")
	case c.Records < 0 || (c.Records == 0 && c.Duration == 0):
		return bad("--records: must be at least 1")
	case c.Warmup < 0:
		return bad("--warmup: must not be negative")
	case c.Rate < 0:
		return bad("--rate: must not be negative (0 is unthrottled)")
	case c.Grace < 0:
		return bad("--grace: must not be negative")
	case c.Partitions < 1:
		return bad("--partitions: must be at least 1")
	case c.ReplicationFactor < 0:
		return bad("--replication-factor: must be at least 1 (or 0 for the cluster's default)")
	case c.Producers < 1 || c.Producers > 1024:
		return bad("--producers: must be between 1 and 1024")
	case c.Consumers < 1 || c.Consumers > 1024:
		return bad("--consumers: must be between 1 and 1024")
	}
	return c.validateProducing()
}

// validateProducing checks the flags of what is produced and how.
func (c Config) validateProducing() error {
	switch {
	case c.RecordSize < 0:
		return bad("--record-size: must not be negative")
	case c.Mode == ModeE2E && c.RecordSize < stampSize:
		return bad("--record-size: e2e needs at least %d bytes (the send time is stamped into each value)", stampSize)
	case c.Linger < 0:
		return bad("--linger: must not be negative (0 sends at once)")
	case c.DeliveryTimeout <= 0:
		return bad("--delivery-timeout: must be positive")
	case c.Body != BodySDK && c.Body != BodyJSON:
		return bad("--body %q is not sdk or json", c.Body)
	case c.JSONBatch < 1:
		return bad("--json-batch: must be at least 1")
	case c.TxnRecords < 0:
		return bad("--txn-records: must not be negative")
	case c.TxnRecords > 0 && !c.Idempotent:
		return bad("--txn-records: a transactional producer is idempotent (--acks all, --idempotence)")
	case c.Progress != ProgressAuto && c.Progress != ProgressOn && c.Progress != ProgressOff:
		return bad("--progress %q is not auto, on or off", c.Progress)
	}
	return c.validateProtocol()
}

// validateProtocol checks --protocol and the flags it rules out.
func (c Config) validateProtocol() error {
	switch {
	case c.Protocol != ProtocolSluice && c.Protocol != ProtocolKafka:
		return bad("--protocol %q is not sluice or kafka", c.Protocol)
	case c.Protocol == ProtocolKafka && c.Mode == ModeShare:
		return bad("--protocol kafka: share reads through the SDK's share consumer (Kafka share groups: docs/kafka.md)")
	case c.Protocol == ProtocolKafka && len(c.Bootstrap) == 0:
		return bad("--bootstrap: no address")
	}
	if c.Protocol == ProtocolKafka {
		for _, name := range sluiceOnly {
			if c.Explicit[name] {
				return bad("--%s is not used with --protocol kafka", name)
			}
		}
	}
	return nil
}

// validateNames checks the topic, the group and their configs.
func (c Config) validateNames() error {
	if err := cluster.ValidateTopicName(c.Topic); err != nil {
		return bad("--topic: %v", err)
	}
	if c.Mode != ModeProduce {
		if err := groups.ValidateGroupID(c.Group); err != nil {
			return bad("--group: %v", err)
		}
	}
	if _, err := cluster.ParseTopicConfig(c.TopicConfig, c.ReplicationFactor); err != nil {
		return bad("--config: %v", err)
	}
	if c.Mode == ModeShare {
		if _, err := shareGroupConfig(c.GroupConfig); err != nil {
			return bad("--group-config: %v", err)
		}
	}
	return nil
}

// validateProducer checks the producer's flags against its body: each
// body's own flags only with it, and an SDK batch that holds a record.
func (c Config) validateProducer() error {
	others := jsonOnly
	if c.Body == BodyJSON {
		others = sdkOnly
	}
	for _, name := range others {
		if c.Explicit[name] {
			return bad("--%s is not used with --body %s", name, c.Body)
		}
	}
	if c.Body == BodySDK {
		pc := c.producerConfig()
		if err := pc.Validate(); err != nil {
			return bad("--batch-size %d: %v", c.BatchSize, errors.Unwrap(err))
		}
		if need := c.RecordSize + c.Keys.MaxLen() + 32; need > c.BatchSize {
			return bad("--record-size %d: a record needs %d bytes, more than --batch-size %d", c.RecordSize, need, c.BatchSize)
		}
	}
	return nil
}

// producerConfig is the SDK producer's configuration of the run.
func (c Config) producerConfig() client.ProducerConfig {
	pc := client.DefaultProducerConfig()
	pc.Frontends, pc.Metadata = c.Frontends, c.Metadata
	pc.ClientID = "sluice-bench"
	pc.Acks, pc.DisableIdempotence = c.Acks, !c.Idempotent
	pc.Compression = c.Compression
	pc.Linger = c.Linger
	if c.Linger == 0 {
		pc.Linger = -1
	}
	pc.BatchSize = c.BatchSize
	if pc.MaxRequestBytes < pc.BatchSize {
		pc.MaxRequestBytes = pc.BatchSize
	}
	if pc.BufferMemory < int64(pc.BatchSize) {
		pc.BufferMemory = int64(pc.BatchSize)
	}
	pc.DeliveryTimeout = c.DeliveryTimeout
	pc.RequestTimeout = min(pc.RequestTimeout, c.DeliveryTimeout)
	if c.TxnRecords > 0 {
		pc.TransactionalID, pc.Offsets = "sluice-bench", c.Offsets // each producer names its own (run.produce)
	}
	return pc
}

// parseArgs parses flags that may come before, between or after positional
// arguments and returns the positional ones.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
