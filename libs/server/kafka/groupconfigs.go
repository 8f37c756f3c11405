package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/shares"
)

// groupConfigTimeout bounds a group config request to the offsets service.
const groupConfigTimeout = 10 * time.Second

// ShareGroupConfigs are the share groups' configs (Kafka's share.* group
// configs and Sluice's own) kept by the offsets service, asked for the
// connection's principal; those of a group never configured are the
// defaults.
type ShareGroupConfigs struct {
	Client *shares.Client
}

func (s ShareGroupConfigs) client(c *Conn) *shares.Client {
	name, _ := c.Principal()
	return s.Client.For(name, c.Host())
}

// GroupConfig implements GroupConfigs.
func (s ShareGroupConfigs) GroupConfig(ctx context.Context, c *Conn, group string) ([]GroupConfigEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, groupConfigTimeout)
	defer cancel()
	cfg, err := s.shareConfig(ctx, c, group)
	if err != nil {
		return nil, err
	}
	defaults := shares.DefaultConfig().Map()
	values := cfg.Map()
	out := make([]GroupConfigEntry, 0, len(shares.ConfigKeys))
	for _, k := range shares.ConfigKeys {
		typ := kmsg.ConfigTypeInt
		if k.Key == shares.ConfigAutoOffsetReset || k.Key == shares.ConfigDeadLetterTopic {
			typ = kmsg.ConfigTypeString
		}
		out = append(out, GroupConfigEntry{Name: k.Key, Value: values[k.Key], Doc: k.Doc, Type: typ, Default: values[k.Key] == defaults[k.Key]})
	}
	return out, nil
}

// AlterGroupConfig implements GroupConfigs: the change is checked against
// the group's configuration here, then the whole configuration is sent to
// the offsets service.
func (s ShareGroupConfigs) AlterGroupConfig(ctx context.Context, c *Conn, group string, ch GroupConfigChange) error {
	ctx, cancel := context.WithTimeout(ctx, groupConfigTimeout)
	defer cancel()
	cfg, err := s.shareConfig(ctx, c, group)
	if err != nil {
		return err
	}
	defaults := shares.DefaultConfig().Map()
	if ch.Replace {
		cfg = shares.DefaultConfig()
	}
	for _, k := range ch.Delete {
		if err := cfg.Set(k, defaults[k]); err != nil {
			return protocol.InvalidConfig.Err("%v", err)
		}
	}
	for k, v := range ch.Set {
		if err := cfg.Set(k, v); err != nil {
			return protocol.InvalidConfig.Err("%v", err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return protocol.InvalidConfig.Err("%v", err)
	}
	if ch.ValidateOnly {
		return nil
	}
	return s.client(c).Configure(ctx, group, cfg.Map())
}

// shareConfig returns a share group's configuration (the defaults for a
// group that does not exist yet).
func (s ShareGroupConfigs) shareConfig(ctx context.Context, c *Conn, group string) (shares.Config, error) {
	cfg := shares.DefaultConfig()
	d, err := s.client(c).Describe(ctx, group)
	switch {
	case protocol.CodeOf(err) == protocol.GroupIDNotFound:
		return cfg, nil
	case err != nil:
		return cfg, err
	}
	for k, v := range d.Config {
		if err := cfg.Set(k, v); err != nil {
			return cfg, protocol.UnknownServerError.Err("share group %s holds a configuration this broker does not know: %v", group, err)
		}
	}
	return cfg, nil
}
