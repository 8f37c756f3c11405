package kafkaapi

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/kafka"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/shares"
)

// groupConfigTimeout bounds a group config request to the offsets service.
const groupConfigTimeout = 10 * time.Second

// GroupConfig implements kafka.GroupConfigs with the share groups' configs
// (Kafka's share.* group configs and Sluice's own): those of a group never
// configured are the defaults.
func (s *Service) GroupConfig(ctx context.Context, c *kafka.Conn, group string) ([]kafka.GroupConfigEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, groupConfigTimeout)
	defer cancel()
	cfg, err := s.shareConfig(ctx, c, group)
	if err != nil {
		return nil, err
	}
	defaults := shares.DefaultConfig().Map()
	values := cfg.Map()
	out := make([]kafka.GroupConfigEntry, 0, len(shares.ConfigKeys))
	for _, k := range shares.ConfigKeys {
		typ := kmsg.ConfigTypeInt
		if k.Key == shares.ConfigAutoOffsetReset || k.Key == shares.ConfigDeadLetterTopic {
			typ = kmsg.ConfigTypeString
		}
		out = append(out, kafka.GroupConfigEntry{Name: k.Key, Value: values[k.Key], Doc: k.Doc, Type: typ, Default: values[k.Key] == defaults[k.Key]})
	}
	return out, nil
}

// AlterGroupConfig implements kafka.GroupConfigs: the change is checked
// against the group's configuration here, then the whole configuration is
// sent to the offsets service.
func (s *Service) AlterGroupConfig(ctx context.Context, c *kafka.Conn, group string, set map[string]string, del []string, replace, validateOnly bool) error {
	ctx, cancel := context.WithTimeout(ctx, groupConfigTimeout)
	defer cancel()
	cfg, err := s.shareConfig(ctx, c, group)
	if err != nil {
		return err
	}
	defaults := shares.DefaultConfig().Map()
	if replace {
		cfg = shares.DefaultConfig()
	}
	for _, k := range del {
		if err := cfg.Set(k, defaults[k]); err != nil {
			return protocol.InvalidConfig.Err("%v", err)
		}
	}
	for k, v := range set {
		if err := cfg.Set(k, v); err != nil {
			return protocol.InvalidConfig.Err("%v", err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return protocol.InvalidConfig.Err("%v", err)
	}
	if validateOnly {
		return nil
	}
	return s.sharesFor(c).Configure(ctx, group, cfg.Map())
}

// shareConfig returns a share group's configuration (the defaults for a
// group that does not exist yet).
func (s *Service) shareConfig(ctx context.Context, c *kafka.Conn, group string) (shares.Config, error) {
	cfg := shares.DefaultConfig()
	d, err := s.sharesFor(c).Describe(ctx, group)
	switch {
	case protocol.CodeOf(err) == protocol.GroupIDNotFound:
		return cfg, nil
	case err != nil:
		return cfg, err
	}
	for k, v := range d.Config {
		if err := cfg.Set(k, v); err != nil {
			return cfg, protocol.UnknownServerError.Err("share group %s holds a configuration this frontend does not know: %v", group, err)
		}
	}
	return cfg, nil
}
