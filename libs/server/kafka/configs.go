package kafka

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// Topic configs under Kafka's names. Sluice's topic configs already use
// Kafka's names but for unclean.leader.election (Kafka's
// unclean.leader.election.enable) and flush.policy (Sluice's own). A few
// Kafka configs have one value in Sluice (fixed): they are described with
// it, and setting them to it is accepted and changes nothing.
type topicConfig struct {
	kafka string // the name Kafka clients use
	key   string // Sluice's key; "" for a fixed config
	typ   kmsg.ConfigType
	fixed string // the only value of a fixed config
	doc   string
}

var topicConfigs = []topicConfig{
	{kafka: "cleanup.policy", key: cluster.ConfigCleanupPolicy, typ: kmsg.ConfigTypeList, doc: "delete: segments past retention are deleted; compact: the latest record of every key is kept; or both"},
	{kafka: "compression.type", typ: kmsg.ConfigTypeString, fixed: "producer", doc: "producer: batches keep the codec the producer chose"},
	{kafka: "delete.retention.ms", key: cluster.ConfigDeleteRetentionMs, typ: kmsg.ConfigTypeLong, doc: "how long a tombstone stays readable after its timestamp on a compacted topic"},
	{kafka: "delivery.delay.ms", key: cluster.ConfigDeliveryDelayMs, typ: kmsg.ConfigTypeLong, doc: "share groups hand a record out no earlier than its timestamp plus this (Sluice's own)"},
	{kafka: "flush.policy", key: cluster.ConfigFlushPolicy, typ: kmsg.ConfigTypeString, doc: "fsync: acks=all after fsync on the in-sync replicas; replication: after they hold it in page cache"},
	{kafka: "local.retention.bytes", key: cluster.ConfigLocalRetentionBytes, typ: kmsg.ConfigTypeLong, doc: "with remote storage, the bytes per partition kept on the storage nodes' disks (-2: retention.bytes)"},
	{kafka: "local.retention.ms", key: cluster.ConfigLocalRetentionMs, typ: kmsg.ConfigTypeLong, doc: "with remote storage, how long segments stay on the storage nodes' disks (-2: retention.ms)"},
	{kafka: "max.message.bytes", key: cluster.ConfigMaxMessageBytes, typ: kmsg.ConfigTypeInt, doc: "largest record batch accepted"},
	{kafka: "max.compaction.lag.ms", key: cluster.ConfigMaxCompactionLagMs, typ: kmsg.ConfigTypeLong, doc: "a dirty record is cleaned within about this long whatever the dirty ratio"},
	{kafka: "message.timestamp.type", typ: kmsg.ConfigTypeString, fixed: "CreateTime", doc: "CreateTime: records keep the producer's timestamps"},
	{kafka: "min.cleanable.dirty.ratio", key: cluster.ConfigMinCleanableDirtyRatio, typ: kmsg.ConfigTypeDouble, doc: "share of a compacted log's closed bytes that must be dirty before it is cleaned"},
	{kafka: "min.compaction.lag.ms", key: cluster.ConfigMinCompactionLagMs, typ: kmsg.ConfigTypeLong, doc: "a record stays uncleaned at least this long after its timestamp"},
	{kafka: "min.insync.replicas", key: cluster.ConfigMinInsyncReplicas, typ: kmsg.ConfigTypeInt, doc: "in-sync replicas an acks=all produce needs"},
	{kafka: "remote.storage.enable", key: cluster.ConfigRemoteStorageEnable, typ: kmsg.ConfigTypeBoolean, doc: "tiered storage: closed segments are copied to the object store and read from there once deleted from disk"},
	{kafka: "retention.bytes", key: cluster.ConfigRetentionBytes, typ: kmsg.ConfigTypeLong, doc: "size per partition past which old segments are deleted (-1: none)"},
	{kafka: "retention.ms", key: cluster.ConfigRetentionMs, typ: kmsg.ConfigTypeLong, doc: "age past which segments are deleted (-1: never)"},
	{kafka: "segment.bytes", key: cluster.ConfigSegmentBytes, typ: kmsg.ConfigTypeInt, doc: "size at which a segment rolls"},
	{kafka: "segment.ms", key: cluster.ConfigSegmentMs, typ: kmsg.ConfigTypeLong, doc: "age at which a segment rolls"},
	{kafka: "unclean.leader.election.enable", key: cluster.ConfigUncleanElection, typ: kmsg.ConfigTypeBoolean, doc: "elect a replica outside the ISR when none is left (may lose records)"},
}

// topicConfigByName finds a topic config by its Kafka name (or by Sluice's
// own key, for clients that pass those).
func topicConfigByName(name string) (topicConfig, bool) {
	for _, c := range topicConfigs {
		if c.kafka == name || c.key != "" && c.key == name {
			return c, true
		}
	}
	return topicConfig{}, false
}

// topicDefaults are the defaults of Sluice's topic configs as strings.
func topicDefaults() map[string]string {
	d := cluster.DefaultTopicConfig()
	return map[string]string{
		cluster.ConfigRetentionMs:       strconv.FormatInt(d.RetentionMs, 10),
		cluster.ConfigRetentionBytes:    strconv.FormatInt(d.RetentionBytes, 10),
		cluster.ConfigSegmentBytes:      strconv.FormatInt(d.SegmentBytes, 10),
		cluster.ConfigSegmentMs:         strconv.FormatInt(d.SegmentMs, 10),
		cluster.ConfigMinInsyncReplicas: strconv.Itoa(d.MinInsyncReplicas),
		cluster.ConfigFlushPolicy:       d.FlushPolicy,
		cluster.ConfigUncleanElection:   strconv.FormatBool(d.UncleanElection),
		cluster.ConfigMaxMessageBytes:   strconv.FormatInt(d.MaxMessageBytes, 10),

		cluster.ConfigCleanupPolicy:          d.CleanupPolicy(),
		cluster.ConfigMinCleanableDirtyRatio: strconv.FormatFloat(d.MinCleanableDirtyRatio, 'g', -1, 64),
		cluster.ConfigMinCompactionLagMs:     strconv.FormatInt(d.MinCompactionLagMs, 10),
		cluster.ConfigMaxCompactionLagMs:     strconv.FormatInt(d.MaxCompactionLagMs, 10),
		cluster.ConfigDeleteRetentionMs:      strconv.FormatInt(d.DeleteRetentionMs, 10),
		cluster.ConfigDeliveryDelayMs:        strconv.FormatInt(d.DeliveryDelayMs, 10),

		cluster.ConfigRemoteStorageEnable: strconv.FormatBool(d.RemoteStorage),
		cluster.ConfigLocalRetentionMs:    strconv.FormatInt(d.LocalRetentionMs, 10),
		cluster.ConfigLocalRetentionBytes: strconv.FormatInt(d.LocalRetentionBytes, 10),
	}
}

// toTopicConfig turns Kafka config pairs into Sluice's: names mapped, fixed
// configs dropped when set to their value. A name Sluice does not know or a
// fixed config set otherwise is INVALID_CONFIG with the reason.
func toTopicConfig(kv map[string]*string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(kv)) {
		c, ok := topicConfigByName(name)
		if !ok {
			return nil, protocol.InvalidConfig.Err("topic config %q is not supported (supported: %s)", name, topicConfigNames())
		}
		v := kv[name]
		if v == nil {
			return nil, protocol.InvalidConfig.Err("topic config %q has a null value", name)
		}
		if c.key == "" {
			if *v != c.fixed {
				return nil, protocol.InvalidConfig.Err("topic config %s=%q is not supported: Sluice has %s=%s only (%s)", name, *v, name, c.fixed, c.doc)
			}
			continue
		}
		out[c.key] = *v
	}
	return out, nil
}

func topicConfigNames() string {
	var names []string
	for _, c := range topicConfigs {
		names = append(names, c.kafka)
	}
	return fmt.Sprint(names)
}

// describeTopicConfig lists a topic's configs under Kafka's names, those
// asked for (all when names is nil).
func describeTopicConfig(snap *cluster.Snapshot, t *cluster.Topic, names []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	defaults := topicDefaults()
	// min.insync.replicas unset on the topic is the cluster's setting for
	// its replication factor: a cluster-wide default once set.
	defaults[cluster.ConfigMinInsyncReplicas] = strconv.Itoa(snap.Settings().MinInsyncFor(t.ReplicationFactor))
	_, clusterMinISR := snap.Config[cluster.SettingMinInsyncReplicas]
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, c := range topicConfigs {
		if names != nil && !slices.Contains(names, c.kafka) {
			continue
		}
		e := kmsg.NewDescribeConfigsResponseResourceConfig()
		e.Name, e.ConfigType = c.kafka, c.typ
		v, set := t.Config[c.key]
		switch {
		case c.key == "":
			v, e.ReadOnly, e.IsDefault, e.Source = c.fixed, true, true, kmsg.ConfigSourceDefaultConfig
		case set:
			e.Source = kmsg.ConfigSourceDynamicTopicConfig
		case c.key == cluster.ConfigMinInsyncReplicas && clusterMinISR:
			v, e.Source = defaults[c.key], kmsg.ConfigSourceDynamicDefaultBrokerConfig
		default:
			v, e.IsDefault, e.Source = defaults[c.key], true, kmsg.ConfigSourceDefaultConfig
		}
		e.Value = &v
		describeExtras(&e, synonyms, docs, c.doc)
		out = append(out, e)
	}
	return out
}

// describeExtras adds what a DescribeConfigs request may ask for besides
// the value: the config's one synonym (itself, from its source) and its
// documentation.
func describeExtras(e *kmsg.DescribeConfigsResponseResourceConfig, synonyms, docs bool, doc string) {
	if synonyms {
		syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		syn.Name, syn.Value, syn.Source = e.Name, e.Value, e.Source
		e.ConfigSynonyms = append(e.ConfigSynonyms, syn)
	}
	if docs {
		e.Documentation = &doc
	}
}

// describeClusterConfig lists the cluster-wide settings as a broker's
// configs: set ones come from the cluster-wide dynamic defaults.
func describeClusterConfig(snap *cluster.Snapshot, names []string, synonyms bool) []kmsg.DescribeConfigsResponseResourceConfig {
	defaults := cluster.ClusterSettingDefaults()
	types := map[string]kmsg.ConfigType{cluster.SettingAutoCreateTopics: kmsg.ConfigTypeBoolean,
		cluster.SettingNumPartitions: kmsg.ConfigTypeInt, cluster.SettingReplicationFactor: kmsg.ConfigTypeShort,
		cluster.SettingMinInsyncReplicas: kmsg.ConfigTypeInt}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, name := range cluster.ClusterSettings() {
		if names != nil && !slices.Contains(names, name) {
			continue
		}
		e := kmsg.NewDescribeConfigsResponseResourceConfig()
		e.Name, e.ConfigType = name, types[name]
		v, set := snap.Config[name]
		if set {
			e.Source = kmsg.ConfigSourceDynamicDefaultBrokerConfig
		} else {
			v, e.IsDefault, e.Source = defaults[name], true, kmsg.ConfigSourceDefaultConfig
		}
		e.Value = &v
		describeExtras(&e, synonyms, false, "")
		out = append(out, e)
	}
	return out
}

// describeConfigs answers DescribeConfigs for topics (their configs),
// brokers (the cluster-wide settings, the same on every broker) and groups
// (BrokerConfig.Groups).
func (b *Broker) describeConfigs(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.DescribeConfigsRequest)
	resp := kmsg.NewPtrDescribeConfigsResponse()
	snap := b.Snapshot(ctx)
	for _, rr := range r.Resources {
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		configs, code, msg := b.describeResource(ctx, c, snap, r, &rr)
		res.Configs, res.ErrorCode = configs, int16(code)
		if code != protocol.None {
			res.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, res)
	}
	return Reply{Msg: resp}
}

// describeResource answers one resource's configs as r asks for them
// (synonyms, documentation), or the code and message refusing it.
func (b *Broker) describeResource(ctx context.Context, c *Conn, snap *cluster.Snapshot, r *kmsg.DescribeConfigsRequest,
	rr *kmsg.DescribeConfigsRequestResource) ([]kmsg.DescribeConfigsResponseResourceConfig, protocol.Code, string) {
	if snap == nil {
		return nil, protocol.BrokerNotAvailable, "no cluster model yet"
	}
	synonyms, docs := r.IncludeSynonyms, r.IncludeDocumentation
	w := b.who(c, snap)
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		if !w.describe(rr.ResourceName) && !w.may(cluster.OpDescribeConfigs, rr.ResourceName) {
			b.denied(c, "DescribeConfigs", rr.ResourceName)
			return nil, protocol.TopicAuthorizationFailed, "the principal may neither see this topic nor describe its configs"
		}
		t, ok := snap.Topic(rr.ResourceName)
		if !ok {
			return nil, protocol.UnknownTopicOrPartition, fmt.Sprintf("topic %q does not exist", rr.ResourceName)
		}
		return describeTopicConfig(snap, t, rr.ConfigNames, synonyms, docs), protocol.None, ""
	case kmsg.ConfigResourceTypeBroker:
		if !w.cluster(cluster.OpDescribeConfigs) {
			b.denied(c, "DescribeConfigs", "broker "+rr.ResourceName)
			return nil, protocol.ClusterAuthorizationFailed, "describing broker configs needs an admin principal or describe_configs on the cluster"
		}
		if err := b.checkBrokerName(snap, rr.ResourceName); err != nil {
			return nil, protocol.CodeOf(err), protocol.MessageOf(err)
		}
		return describeClusterConfig(snap, rr.ConfigNames, synonyms), protocol.None, ""
	case kmsg.ConfigResourceTypeGroupConfig:
		if b.cfg.Groups == nil {
			return nil, protocol.InvalidRequest, "this broker keeps no group configs"
		}
		entries, err := b.cfg.Groups.GroupConfig(ctx, c, rr.ResourceName)
		if err != nil {
			return nil, protocol.CodeOf(err), protocol.MessageOf(err)
		}
		return describeGroupConfig(entries, rr.ConfigNames, synonyms, docs), protocol.None, ""
	default:
		return nil, protocol.InvalidRequest, fmt.Sprintf("configs of resource type %d are not kept (topics, brokers and groups are)", rr.ResourceType)
	}
}

// describeGroupConfig lists a group's configs, those asked for (all when
// names is nil).
func describeGroupConfig(entries []GroupConfigEntry, names []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, g := range entries {
		if names != nil && !slices.Contains(names, g.Name) {
			continue
		}
		e := kmsg.NewDescribeConfigsResponseResourceConfig()
		v := g.Value
		e.Name, e.Value, e.ConfigType, e.IsDefault, e.Source = g.Name, &v, g.Type, g.Default, kmsg.ConfigSourceGroupConfig
		if g.Default {
			e.Source = kmsg.ConfigSourceDefaultConfig
		}
		describeExtras(&e, synonyms, docs, g.Doc)
		out = append(out, e)
	}
	return out
}

// checkBrokerName accepts "" (the cluster-wide defaults) and the id of a
// broker of snap.
func (b *Broker) checkBrokerName(snap *cluster.Snapshot, name string) error {
	if name == "" {
		return nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err == nil {
		for _, br := range Brokers(snap) {
			if br.NodeID == int32(id) {
				return nil
			}
		}
	}
	return protocol.InvalidRequest.Err("no broker %q", name)
}

// alterConfigs answers AlterConfigs: each resource's configs are replaced
// by the ones given (the others return to their defaults).
func (b *Broker) alterConfigs(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.AlterConfigsRequest)
	resp := kmsg.NewPtrAlterConfigsResponse()
	snap := b.Snapshot(ctx)
	for _, rr := range r.Resources {
		set := map[string]*string{}
		for _, cfg := range rr.Configs {
			set[cfg.Name] = cfg.Value
		}
		err := b.alterResource(ctx, c, snap, configAlter{typ: rr.ResourceType, name: rr.ResourceName, set: set, replace: true, validateOnly: r.ValidateOnly})
		res := kmsg.NewAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		res.ErrorCode, res.ErrorMessage = errorFields(err)
		resp.Resources = append(resp.Resources, res)
	}
	return Reply{Msg: resp}
}

// incrementalAlterConfigs answers IncrementalAlterConfigs: SET and DELETE
// (APPEND and SUBTRACT apply to list configs, which Sluice's are not).
func (b *Broker) incrementalAlterConfigs(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.IncrementalAlterConfigsRequest)
	resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
	snap := b.Snapshot(ctx)
	for _, rr := range r.Resources {
		set, del := map[string]*string{}, []string{}
		var err error
		for _, cfg := range rr.Configs {
			switch cfg.Op {
			case kmsg.IncrementalAlterConfigOpSet:
				set[cfg.Name] = cfg.Value
			case kmsg.IncrementalAlterConfigOpDelete:
				del = append(del, cfg.Name)
			default:
				err = protocol.InvalidConfig.Err("%s: APPEND and SUBTRACT apply to list configs; use SET", cfg.Name)
			}
		}
		if err == nil {
			err = b.alterResource(ctx, c, snap, configAlter{typ: rr.ResourceType, name: rr.ResourceName, set: set, del: del, validateOnly: r.ValidateOnly})
		}
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		res.ErrorCode, res.ErrorMessage = errorFields(err)
		resp.Resources = append(resp.Resources, res)
	}
	return Reply{Msg: resp}
}

// configAlter is one resource's part of AlterConfigs (replace: the set
// given is the whole set, every other key back to its default) or
// IncrementalAlterConfigs (set and delete keys).
type configAlter struct {
	typ          kmsg.ConfigResourceType
	name         string
	set          map[string]*string
	del          []string
	replace      bool
	validateOnly bool
}

// alterResource changes one resource's configs: set and delete names, or
// with replace every config (those not in set return to their defaults).
// Topic configs go to the topic (applied live by the storage nodes); the
// cluster-wide broker defaults ("" as the broker name) to the cluster
// settings.
func (b *Broker) alterResource(ctx context.Context, c *Conn, snap *cluster.Snapshot, a configAlter) error {
	if snap == nil {
		return protocol.BrokerNotAvailable.Err("no cluster model yet")
	}
	if refused := alterRefusal(b.who(c, snap), a); refused != nil {
		b.denied(c, "AlterConfigs", a.name)
		return refused
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.AdminTimeout)
	defer cancel()
	switch a.typ {
	case kmsg.ConfigResourceTypeTopic:
		return b.alterTopicConfig(ctx, c, snap, a)
	case kmsg.ConfigResourceTypeBroker:
		return b.alterClusterConfig(ctx, c, snap, a)
	case kmsg.ConfigResourceTypeGroupConfig:
		if b.cfg.Groups == nil {
			return protocol.InvalidRequest.Err("this broker keeps no group configs")
		}
		kv, err := values(a.set)
		if err != nil {
			return err
		}
		err = b.cfg.Groups.AlterGroupConfig(ctx, c, a.name, GroupConfigChange{Set: kv, Delete: a.del, Replace: a.replace, ValidateOnly: a.validateOnly})
		if err == nil && !a.validateOnly {
			c.Log().Info("kafka group configs changed", "group", a.name, "set", kv, "delete", a.del)
		}
		return err
	}
	return protocol.InvalidRequest.Err("configs of resource type %d are not kept (topics, brokers and groups are)", a.typ)
}

// alterRefusal is why the principal may not change the resource's configs
// (nil: it may): alter_configs on a topic, alter_configs on the cluster for
// the brokers' (the cluster's settings), an admin for the rest.
func alterRefusal(w who, a configAlter) error {
	switch a.typ {
	case kmsg.ConfigResourceTypeTopic:
		if !w.may(cluster.OpAlterConfigs, a.name) {
			return protocol.TopicAuthorizationFailed.Err("changing a topic's configs needs an admin principal or an alter_configs ACL on it")
		}
	case kmsg.ConfigResourceTypeBroker:
		if !w.cluster(cluster.OpAlterConfigs) {
			return protocol.ClusterAuthorizationFailed.Err("changing broker configs needs an admin principal or alter_configs on the cluster")
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !w.admin() {
			return protocol.GroupAuthorizationFailed.Err("changing a group's configs needs an admin principal")
		}
	default:
		if !w.admin() {
			return protocol.ClusterAuthorizationFailed.Err("changing configs needs an admin principal")
		}
	}
	return nil
}

// alterTopicConfig changes a topic's configs at the metadata service.
func (b *Broker) alterTopicConfig(ctx context.Context, c *Conn, snap *cluster.Snapshot, a configAlter) error {
	t, ok := snap.Topic(a.name)
	if !ok {
		return protocol.UnknownTopicOrPartition.Err("topic %q does not exist", a.name)
	}
	kv, err := toTopicConfig(a.set)
	if err != nil {
		return err
	}
	var keys []string
	for _, n := range a.del {
		tc, ok := topicConfigByName(n)
		if !ok {
			return protocol.InvalidConfig.Err("topic config %q is not supported", n)
		}
		if tc.key != "" {
			keys = append(keys, tc.key)
		}
	}
	if a.replace {
		// The keys to delete are those the topic has now: read them from
		// the metadata leader, not from this broker's model, which may not
		// have seen a change answered just before.
		if t, err = b.admin.DescribeTopic(ctx, a.name); err != nil {
			return err
		}
	}
	change := configChange(t.Config, kv, keys, a.replace)
	if _, err := cluster.ParseTopicConfig(change.Apply(t.Config), t.ReplicationFactor); err != nil {
		return protocol.InvalidConfig.Err("%v", err)
	}
	if a.validateOnly {
		return nil
	}
	if _, err = b.admin.AlterTopicConfig(ctx, a.name, change); err != nil {
		return err
	}
	c.Log().Info("kafka topic configs changed", "topic", a.name, "set", change.Set, "delete", change.Delete)
	_, _ = b.model.Refresh(ctx) // the client's next DescribeConfigs sees the change
	return nil
}

// alterClusterConfig changes the cluster's settings (Kafka's broker
// defaults: an empty broker name).
func (b *Broker) alterClusterConfig(ctx context.Context, c *Conn, snap *cluster.Snapshot, a configAlter) error {
	if a.name != "" {
		return protocol.InvalidRequest.Err("configs are cluster-wide: alter the broker defaults (an empty broker name), not broker %q", a.name)
	}
	kv, err := values(a.set)
	if err != nil {
		return err
	}
	change := configChange(snap.Config, kv, a.del, a.replace)
	if _, err := cluster.ParseClusterConfig(change.Apply(snap.Config)); err != nil {
		return protocol.InvalidConfig.Err("%v", err)
	}
	if a.validateOnly {
		return nil
	}
	if _, err = b.admin.SetClusterConfig(ctx, change); err != nil {
		return err
	}
	c.Log().Info("kafka cluster settings changed", "set", change.Set, "delete", change.Delete)
	_, _ = b.model.Refresh(ctx)
	return nil
}

// values returns the configs set, refusing null values.
func values(set map[string]*string) (map[string]string, error) {
	kv := map[string]string{}
	for k, v := range set {
		if v == nil {
			return nil, protocol.InvalidConfig.Err("%s has a null value", k)
		}
		kv[k] = *v
	}
	return kv, nil
}

// configChange is the change that sets kv and deletes del, and with
// replace also deletes every key of cur that kv does not set (AlterConfigs
// replaces a resource's whole set).
func configChange(cur, kv map[string]string, del []string, replace bool) cluster.AlterTopicConfigRequest {
	if replace {
		for k := range cur {
			if _, kept := kv[k]; !kept {
				del = append(del, k)
			}
		}
	}
	return cluster.AlterTopicConfigRequest{Set: kv, Delete: del}
}

// errorFields turns an error into a response's code and message.
func errorFields(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	msg := protocol.MessageOf(err)
	return protocol.KafkaOf(err, protocol.AdminAnswer), &msg
}
