package franz

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/aerostream/aerostream/tests/go/internal/target"
)

// Topics through kadm: a created topic is listed with its partitions and
// replicas; creating it again is refused with TOPIC_ALREADY_EXISTS;
// partitions are added; a deleted topic is no longer listed.
func TestAdminTopics(t *testing.T) {
	target.Each(t, func(t *testing.T, tg target.Target) {
		ctx := ctxFor(t)
		adm := admin(t, tg)
		topic := createTopic(t, tg, "admin", 3, nil)

		details, err := adm.ListTopics(ctx, topic)
		if err == nil {
			err = details.Error()
		}
		if err != nil {
			t.Fatalf("list %s: %v", topic, err)
		}
		d := details[topic]
		if len(d.Partitions) != 3 {
			t.Fatalf("listed with %d partitions, want 3", len(d.Partitions))
		}
		for _, p := range d.Partitions.Sorted() {
			if len(p.Replicas) != int(tg.ReplicationFactor()) || p.Leader < 0 || !slices.Contains(p.Replicas, p.Leader) {
				t.Errorf("partition %d: leader %d, replicas %v, want %d replicas with the leader among them",
					p.Partition, p.Leader, p.Replicas, tg.ReplicationFactor())
			}
		}
		if !slices.Contains(details.Names(), topic) || d.ID == (kadm.TopicID{}) {
			t.Errorf("listed %v with id %v", details.Names(), d.ID)
		}

		again, err := adm.CreateTopic(ctx, 3, tg.ReplicationFactor(), nil, topic)
		if err == nil {
			err = again.Err
		}
		if !errors.Is(err, kerr.TopicAlreadyExists) {
			t.Errorf("creating %s twice: %v, want %v", topic, err, kerr.TopicAlreadyExists)
		}

		added, err := adm.CreatePartitions(ctx, 2, topic)
		if err == nil {
			err = added.Error()
		}
		if err != nil {
			t.Fatalf("add 2 partitions: %v", err)
		}
		target.Eventually(t, topic+" has 5 partitions", func() error {
			ds, err := adm.ListTopics(ctx, topic)
			if err != nil {
				return err
			}
			if n := len(ds[topic].Partitions); n != 5 {
				return fmt.Errorf("%d partitions", n)
			}
			return nil
		})

		deleted, err := adm.DeleteTopic(ctx, topic)
		if err == nil {
			err = deleted.Err
		}
		if err != nil {
			t.Fatalf("delete %s: %v", topic, err)
		}
		target.Eventually(t, topic+" is no longer listed", func() error {
			all, err := adm.ListTopics(ctx)
			if err != nil {
				return err
			}
			if all.Has(topic) {
				return fmt.Errorf("still listed")
			}
			return nil
		})
	})
}

// Topic configs: a config set at creation is described as a dynamic topic
// config, an unset one with its default; an incremental alter sets and
// deletes; an unknown name and a bad value are refused with INVALID_CONFIG.
func TestAdminTopicConfigs(t *testing.T) {
	target.Each(t, func(t *testing.T, tg target.Target) {
		ctx := ctxFor(t)
		adm := admin(t, tg)
		topic := createTopic(t, tg, "configs", 1, map[string]*string{"retention.ms": str("3600000")})

		config := func(name string) (kadm.Config, error) {
			rcs, err := adm.DescribeTopicConfigs(ctx, topic)
			if err != nil {
				return kadm.Config{}, err
			}
			rc, err := rcs.On(topic, nil)
			if err == nil {
				err = rc.Err
			}
			if err != nil {
				return kadm.Config{}, err
			}
			for _, c := range rc.Configs {
				if c.Key == name {
					return c, nil
				}
			}
			return kadm.Config{}, fmt.Errorf("%s not described", name)
		}
		hasValue := func(name, want string, source kmsg.ConfigSource) func() error {
			return func() error {
				c, err := config(name)
				if err != nil {
					return err
				}
				if c.MaybeValue() != want || c.Source != source {
					return fmt.Errorf("%s=%q from %v, want %q from %v", name, c.MaybeValue(), c.Source, want, source)
				}
				return nil
			}
		}
		if err := hasValue("retention.ms", "3600000", kmsg.ConfigSourceDynamicTopicConfig)(); err != nil {
			t.Error(err)
		}
		if err := hasValue("cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)(); err != nil {
			t.Error(err)
		}

		alter := func(cs ...kadm.AlterConfig) error {
			rs, err := adm.AlterTopicConfigs(ctx, cs, topic)
			if err != nil {
				return err
			}
			r, err := rs.On(topic, nil)
			if err == nil {
				err = r.Err
			}
			return err
		}
		if err := alter(
			kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.bytes", Value: str("1048576")},
			kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"},
		); err != nil {
			t.Fatalf("set retention.bytes, delete retention.ms: %v", err)
		}
		// a broker may answer from metadata that follows the controller
		target.Eventually(t, "retention.bytes is set", hasValue("retention.bytes", "1048576", kmsg.ConfigSourceDynamicTopicConfig))
		target.Eventually(t, "retention.ms is back to its default", hasValue("retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig))

		if err := alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "no.such.config", Value: str("1")}); !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("set an unknown config: %v, want %v", err, kerr.InvalidConfig)
		}
		if err := alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.bytes", Value: str("lots")}); !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("set retention.bytes=lots: %v, want %v", err, kerr.InvalidConfig)
		}
		if err := hasValue("retention.bytes", "1048576", kmsg.ConfigSourceDynamicTopicConfig)(); err != nil {
			t.Errorf("after refused changes: %v", err)
		}
	})
}

// The cluster as kadm describes it: every broker, a controller, a cluster id.
func TestAdminCluster(t *testing.T) {
	target.Each(t, func(t *testing.T, tg target.Target) {
		m, err := admin(t, tg).BrokerMetadata(ctxFor(t))
		if err != nil {
			t.Fatalf("metadata: %v", err)
		}
		if len(m.Brokers) != tg.Brokers || m.Cluster == "" || m.Controller < 0 {
			t.Fatalf("%d brokers (%v), cluster %q, controller %d; want %d brokers, a cluster id and a controller",
				len(m.Brokers), m.Brokers, m.Cluster, m.Controller, tg.Brokers)
		}
		for _, b := range m.Brokers {
			if b.Host != "127.0.0.1" || b.Port <= 0 {
				t.Errorf("broker %d at %s:%d", b.NodeID, b.Host, b.Port)
			}
		}
	})
}

// ACLs through kadm: created, described by a filter, deleted; a broker
// without an authorizer refuses them with SECURITY_DISABLED.
func TestAdminACLs(t *testing.T) {
	target.Each(t, func(t *testing.T, tg target.Target) {
		ctx := ctxFor(t)
		adm := admin(t, tg)
		topic := target.Unique("acl-topic")
		user := "User:" + target.Unique("go-reader")
		acl := func() *kadm.ACLBuilder {
			return kadm.NewACLs().Topics(topic).Allow(user).AllowHosts("*").
				Operations(kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
		}
		created, err := adm.CreateACLs(ctx, acl())
		if !tg.Authorizer {
			if err == nil {
				for _, c := range created {
					err = errors.Join(err, c.Err)
				}
			}
			if !errors.Is(err, kerr.SecurityDisabled) {
				t.Fatalf("create an ACL without an authorizer: %v, want %v", err, kerr.SecurityDisabled)
			}
			return
		}
		if err != nil {
			t.Fatalf("create ACLs: %v", err)
		}
		for _, c := range created {
			if c.Err != nil {
				t.Fatalf("create %s %v on %s: %v", c.Principal, c.Operation, c.Name, c.Err)
			}
		}
		described := func() ([]string, error) {
			rs, err := adm.DescribeACLs(ctx, kadm.NewACLs().Topics(topic).Allow(user).AllowHosts().
				Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternMatch))
			if err != nil {
				return nil, err
			}
			var out []string
			for _, r := range rs {
				if r.Err != nil {
					return nil, r.Err
				}
				for _, d := range r.Described {
					out = append(out, fmt.Sprintf("%s %s %s %v %v %v", d.Principal, d.Host, d.Name, d.Pattern, d.Operation, d.Permission))
				}
			}
			slices.Sort(out)
			return out, nil
		}
		want := []string{
			fmt.Sprintf("%s * %s LITERAL DESCRIBE ALLOW", user, topic),
			fmt.Sprintf("%s * %s LITERAL READ ALLOW", user, topic),
		}
		target.Eventually(t, "the ACLs are described", func() error {
			got, err := described()
			if err != nil {
				return err
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("described %q, want %q", got, want)
			}
			return nil
		})
		deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Topics(topic).Allow(user).AllowHosts().
			Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternLiteral))
		if err != nil {
			t.Fatalf("delete ACLs: %v", err)
		}
		n := 0
		for _, d := range deleted {
			if d.Err != nil {
				t.Fatalf("delete ACLs: %v", d.Err)
			}
			n += len(d.Deleted)
		}
		if n != 2 {
			t.Errorf("deleted %d ACLs, want 2", n)
		}
		target.Eventually(t, "the ACLs are gone", func() error {
			got, err := described()
			if err != nil {
				return err
			}
			if len(got) != 0 {
				return fmt.Errorf("still described: %q", got)
			}
			return nil
		})
	})
}
